"""``make bench`` section 10: one node with Redis a round trip away."""

from __future__ import annotations

import statistics

from servers import services
from tools.bench.base import Bench, Section
from tools.bench_crawl import VARIANT_SPIDERS, Figures, crawl_once
from tools.bench_measures import REMOTE_DELAY_MS, REMOTE_VARIANTS, round_trip_ms
from tools.bench_reports import report_remote


class RemoteRedis(Section):
    number = 10
    title = "one node with Redis a round trip away"

    def __init__(self) -> None:
        self.remote = {name: Figures() for name in REMOTE_VARIANTS}
        self.rtt: list[float] = []

    def measure(self, bench: Bench, run: int) -> None:
        latency = services.start_latency_proxy(bench.redis_url, REMOTE_DELAY_MS)
        try:
            self.rtt.append(round_trip_ms(latency.url))
            for name, settings in REMOTE_VARIANTS.items():
                workdir = bench.work / f"remote-{run}"
                spider = VARIANT_SPIDERS.get(name, "shop")
                self.remote[name].samples.append(
                    crawl_once(latency.url, settings, 1, workdir, spider=spider)
                )
        finally:
            latency.stop()

    def report(self, bench: Bench) -> None:
        report_remote(self.remote, statistics.median(self.rtt), bench.one_node)
