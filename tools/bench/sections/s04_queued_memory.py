"""``make bench`` section 4: Redis memory per queued request and per host."""

from __future__ import annotations

from servers.clients import redis_at
from tools.bench.base import Bench, Section
from tools.bench_measures import queued_memory
from tools.bench_reports import report_queued_memory


class QueuedMemory(Section):
    number = 4
    title = "Redis memory per queued request and per host"

    once = True

    def measure(self, bench: Bench, run: int) -> None:
        with redis_at(bench.redis_url) as client:
            self.queued = queued_memory(client)

    def report(self, bench: Bench) -> None:
        report_queued_memory(self.queued)
