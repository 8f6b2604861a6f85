"""``make bench`` section 21: a frontier bigger than Redis: memory and costs per
request at 1M and 10M queued."""

from __future__ import annotations

from tools import overflow_bench
from tools.bench.base import Bench, Section, mongo_server


class Overflow(Section):
    number = 21
    title = "a frontier bigger than Redis: memory and costs per request at 1M and 10M queued"

    once = True  # two long fills per size; the figures are memory and per-request costs
    needs_mongo = True

    def measure(self, bench: Bench, run: int) -> None:
        assert bench.mongo_uri is not None
        self.rows = overflow_bench.measure(bench.redis_url, bench.mongo_uri)

    def report(self, bench: Bench) -> None:
        print(f"\n21. A frontier bigger than Redis (FRONTIER_OVERFLOW), {mongo_server(bench)}")
        overflow_bench.report(self.rows)
