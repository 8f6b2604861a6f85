"""``make bench`` section 13: the Redis ceiling: the frontier's scripts driven without Scrapy."""

from __future__ import annotations

from tools import redis_ceiling
from tools.bench.base import Bench, Section


class RedisCeiling(Section):
    number = 13
    title = "the Redis ceiling: the frontier's scripts driven without Scrapy"

    once = True

    def measure(self, bench: Bench, run: int) -> None:
        self.rows = [redis_ceiling.measure(bench.redis_url, n, 8.0) for n in (1, 2, 3)]
        self.aof = redis_ceiling.aof_bytes_per_page(bench.redis_url)

    def report(self, bench: Bench) -> None:
        redis_ceiling.report(self.rows, self.aof)
