"""``make bench`` section 30: crawl scope: the check's CPU per URL with 1 and 50
patterns, and what a mid-crawl exclusion costs with 100,000 and 1,000,000 queued."""

from __future__ import annotations

from tools import scope_bench
from tools.bench.base import Bench, Section


class Scope(Section):
    number = 30
    title = "crawl scope: CPU per URL with 1 and 50 patterns; a mid-crawl exclusion at 1M queued"

    once = True

    def measure(self, bench: Bench, run: int) -> None:
        self.result = scope_bench.measure(bench.redis_url, bench.work / "scope")

    def report(self, bench: Bench) -> None:
        print(f"\n30. {self.title}")
        scope_bench.report(self.result)
