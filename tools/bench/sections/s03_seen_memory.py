"""``make bench`` section 3: Redis memory per seen URL: stock set, exact dupefilter,
Bloom filter."""

from __future__ import annotations

from servers.clients import redis_at
from tools.bench.base import Bench, Section
from tools.bench_measures import seen_memory
from tools.bench_reports import report_seen_memory


class SeenMemory(Section):
    number = 3
    title = "Redis memory per seen URL: stock set, exact dupefilter, Bloom filter"

    once = True  # memory is not noisy

    def measure(self, bench: Bench, run: int) -> None:
        with redis_at(bench.redis_url) as client:
            self.seen = seen_memory(client)

    def report(self, bench: Bench) -> None:
        report_seen_memory(self.seen)
