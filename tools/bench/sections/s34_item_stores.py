"""``make bench`` section 34: the item stores (JSON Lines, the Redis stream,
Parquet) against Scrapy's feed export and stock scrapy-redis's RedisPipeline: items per
second and bytes per item, shop items and documents (MongoDB's is section 6)."""

from __future__ import annotations

from tools import stores_bench
from tools.bench.base import Bench, Section


class ItemStores(Section):
    number = 34
    title = "item stores: items/s and bytes per item, against a feed export and scrapy-redis"

    once = True

    def measure(self, bench: Bench, run: int) -> None:
        self.result = stores_bench.measure(bench.redis_url, bench.work / "stores")

    def report(self, bench: Bench) -> None:
        print(f"\n34. {self.title}")
        stores_bench.report(self.result)
