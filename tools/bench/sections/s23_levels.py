"""``make bench`` section 23: politeness per domain and address: lease cost at 1M
hosts, Redis bytes per host."""

from __future__ import annotations

from tools import levels_bench
from tools.bench.base import Bench, Section


class Levels(Section):
    number = 23
    title = "politeness per domain and address: lease cost at 1M hosts, Redis bytes per host"

    once = True  # a million hosts filled three times; the figures are counts and bytes

    def measure(self, bench: Bench, run: int) -> None:
        self.result = levels_bench.measure(bench.redis_url)

    def report(self, bench: Bench) -> None:
        print("\n23. Politeness per registered domain and per server address")
        levels_bench.report(self.result)
