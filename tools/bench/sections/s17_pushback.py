"""``make bench`` section 17: hosts that push back: the cluster slowing down for them."""

from __future__ import annotations

from tools import pushback_bench
from tools.bench.base import Bench, Section


class Pushback(Section):
    number = 17
    title = "hosts that push back: the cluster slowing down for them"

    once = True  # minutes a crawl

    def measure(self, bench: Bench, run: int) -> None:
        self.pushback = pushback_bench.measure(bench.redis_url, bench.work / "pushback")

    def report(self, bench: Bench) -> None:
        pushback_bench.report(self.pushback)
