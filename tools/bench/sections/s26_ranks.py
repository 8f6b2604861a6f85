"""``make bench`` section 26: what to fetch first: top sites' coverage by importance,
sketch bytes, lease cost."""

from __future__ import annotations

from tools import ranks_bench
from tools.bench.base import Bench, Section


class Ranks(Section):
    number = 26
    title = "what to fetch first: top sites' coverage by importance, sketch bytes, lease cost"

    once = True  # a million hosts filled twice, two crawls of a generated web

    def measure(self, bench: Bench, run: int) -> None:
        self.result = ranks_bench.measure(bench.redis_url, bench.work / "ranks")

    def report(self, bench: Bench) -> None:
        print('\n26. What to fetch first: host ranks and FRONTIER_ORDER = "importance"')
        ranks_bench.report(self.result)
