"""``make bench`` section 35: the Firecrawl-compatible API: a live scrape's
latency, and documents a second read back from a crawl."""

from __future__ import annotations

from tools import api_bench
from tools.bench.base import Bench, Section


class Api(Section):
    number = 35
    title = "the Firecrawl-compatible API: scrape latency, documents read a second"

    once = True

    def measure(self, bench: Bench, run: int) -> None:
        self.result = api_bench.measure(bench.redis_url, bench.work / "api")

    def report(self, bench: Bench) -> None:
        print(f"\n35. {self.title}")
        api_bench.report(self.result)
