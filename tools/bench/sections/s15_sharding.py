"""``make bench`` section 15: the cost of sharding: a single Redis against a cluster."""

from __future__ import annotations

from servers import redis_cluster
from tools import redis_ceiling
from tools.bench.base import Bench, Section
from tools.bench_crawl import Figures, crawl_once
from tools.bench_measures import CEILING_HOSTS, SHARDING_VARIANTS
from tools.bench_reports import report_sharding


class Sharding(Section):
    number = 15
    title = "the cost of sharding: a single Redis against a cluster"

    def __init__(self) -> None:
        self.sharding = {name: Figures() for name in SHARDING_VARIANTS}
        self.ceiling: list[dict] = []
        self.cluster: redis_cluster.RedisCluster | None = None

    def measure(self, bench: Bench, run: int) -> None:
        if self.cluster is None:  # kept for every run, stopped after the last
            self.cluster = redis_cluster.start_redis_cluster(bench.work / "cluster-15")
        url = self.cluster.url
        for name, (on_cluster, settings) in SHARDING_VARIANTS.items():
            self.sharding[name].samples.append(
                crawl_once(
                    url if on_cluster else bench.redis_url,
                    settings,
                    1,
                    bench.work / f"shard-{run}",
                    cluster=on_cluster,
                )
            )
        if run == 0:
            for shards in (1, 96):
                for clients in (1, 2):
                    self.ceiling.append(
                        redis_ceiling.measure(
                            url, clients, 8.0, shards=shards, cluster=True, hosts=CEILING_HOSTS
                        )
                    )

    def close(self) -> None:
        if self.cluster is not None:
            self.cluster.stop()

    def report(self, bench: Bench) -> None:
        report_sharding(self.sharding, self.ceiling)
