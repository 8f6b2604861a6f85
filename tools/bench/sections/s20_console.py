"""``make bench`` section 20: the web console: Redis commands and time per page as the
crawl grows."""

from __future__ import annotations

from tools import console_bench
from tools.bench.base import Bench, Section


class Console(Section):
    number = 20
    title = "the web console: Redis commands and time per page as the crawl grows"

    once = True  # filling a million requests takes a while; the figures are counts

    def measure(self, bench: Bench, run: int) -> None:
        self.rows = console_bench.measure(bench.redis_url, bench.work / "console")

    def report(self, bench: Bench) -> None:
        print("\n20. The web console, pages served by scrapy console against one Redis")
        console_bench.report(self.rows)
