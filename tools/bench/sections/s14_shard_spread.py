"""``make bench`` section 14: one crawl's spread over a three-primary Redis Cluster."""

from __future__ import annotations

from servers import redis_cluster
from tools import shard_spread
from tools.bench.base import Bench, Section
from tools.bench_measures import SPREAD_PAGES, SPREAD_SHARDS


class ShardSpread(Section):
    number = 14
    title = "one crawl's spread over a three-primary Redis Cluster"

    once = True  # placement is not noisy

    def measure(self, bench: Bench, run: int) -> None:
        cluster = redis_cluster.start_redis_cluster(bench.work / "cluster")
        try:
            self.spread = shard_spread.measure(cluster.url, SPREAD_SHARDS, SPREAD_PAGES)
        finally:
            cluster.stop()

    def report(self, bench: Bench) -> None:
        shard_spread.report(self.spread, SPREAD_PAGES)
