"""What ``make bench``'s crawl sections share: the variants and one measured crawl.

A crawl is measured on the site's side: pages served divided by the time from the
first to the last request, so start-up and close-down are left out. CPU is the node
process's own user+sys time per page; Redis commands per page come from ``INFO
commandstats``, round trips from redis-py on the node's side
(``tools/count_round_trips.py``).
"""

from __future__ import annotations

import json
import os
import statistics
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import redis
from redis.cluster import RedisCluster

from servers import services
from servers.clients import cluster_at, redis_at

RUNS = int(os.environ.get("BENCH_RUNS", "3"))
CONCURRENCY = 32
NO_ADDON = '{"extensions.addon.DistributedAddon": null}'

BENCH_SPIDERS = "crawler.spiders,tools.bench_spiders"
# Items as a Scrapy user writes them without this project: a feed export ({workdir}
# is the run's directory).
FEED = json.dumps({"{workdir}/items.jsonl": {"format": "jsonlines", "overwrite": True}})
PLAIN = "plain Scrapy (memory queue, feed export)"
STOCK = "stock scrapy-redis (RedisSpider, feed export)"
OURS = "this project (leases, delayed retries, checkpoints)"
# plain Scrapy with the node's collector tuning: what the distributed layer itself costs
PLAIN_TUNED = "plain Scrapy + the node's collector tuning"
# and with the Scrapy setting the node once set for the same saving (CONCURRENT_ITEMS):
# what a Scrapy user can tune alike without this project's parts
PLAIN_SETTINGS_TUNED = "plain Scrapy + GC tuning + CONCURRENT_ITEMS=16"
# and with the node's other part that saves CPU a page without distributing anything
# (extensions/outputs.py): the baseline of the layer's own cost
PLAIN_NODE_TUNED = "plain Scrapy + the node's tuning and output tasks"
# politeness decided at lease time, at a rate above what one node asks of the site
POLITE = "this project + CLUSTER_HOST_RATE=100000 (at lease)"
# what the node's collector tuning (extensions/gctuning.py) buys: Python's own thresholds
PYTHON_GC = "this project, Python's GC thresholds, no freeze"
# the node without the page features it turns on that plain Scrapy has not: what
# the distribution itself costs, apart from them
FEATURES_OFF = "this project, page features off (user agents, canonical, meta robots, ...)"
# section 1's variants, in the order they are run and shown
VARIANTS: dict[str, dict[str, str]] = {
    PLAIN: {"ADDONS": NO_ADDON, "SPIDER_MODULES": BENCH_SPIDERS, "FEEDS": FEED},
    STOCK: {
        "ADDONS": NO_ADDON,
        "SPIDER_MODULES": BENCH_SPIDERS,
        "FEEDS": FEED,
        "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
        "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
    },
    OURS: {},
}
VARIANTS[PLAIN_TUNED] = {
    **VARIANTS[PLAIN],
    "EXTENSIONS": '{"extensions.gctuning.GarbageCollectorTuning": 100}',
    "SPIDER_MIDDLEWARES": '{"extensions.gctuning.ResponseRelease": 25}',
}
VARIANTS[PLAIN_SETTINGS_TUNED] = {**VARIANTS[PLAIN_TUNED], "CONCURRENT_ITEMS": "16"}
VARIANTS[PLAIN_NODE_TUNED] = {
    **VARIANTS[PLAIN_TUNED],
    "EXTENSIONS": json.dumps(
        {
            "extensions.gctuning.GarbageCollectorTuning": 100,
            "extensions.outputs.SpiderOutputTasks": 100,
        }
    ),
}
VARIANTS[POLITE] = {"CLUSTER_HOST_RATE": "100000"}
VARIANTS[PYTHON_GC] = {"GC_FREEZE": "False", "GC_THRESHOLD": ""}
VARIANTS[FEATURES_OFF] = {"USER_AGENT_ROTATION": "False", "CANONICAL_ENABLED": "False",
                          "ROBOTS_META_OBEY": "False", "USAGE_SIGNALS_ENABLED": "False",
                          "MAX_LINKS_PER_PAGE": "0"}  # fmt: skip
# the spider each variant runs: the same parsing on every side
VARIANT_SPIDERS = {PLAIN: "plain_shop", PLAIN_TUNED: "plain_shop", PLAIN_NODE_TUNED: "plain_shop",
                   PLAIN_SETTINGS_TUNED: "plain_shop", STOCK: "stock_shop"}  # fmt: skip


@dataclass
class Sample:
    pages: int
    seconds: float
    cpu: float
    redis_calls: int
    round_trips: int = 0
    reactor_round_trips: int = 0

    @property
    def rate(self) -> float:
        return (self.pages - 1) / self.seconds if self.seconds else 0.0


@dataclass
class Figures:
    samples: list[Sample] = field(default_factory=list)

    def median(self, attr: str) -> float:
        return statistics.median(getattr(s, attr) for s in self.samples)

    @property
    def rate(self) -> float:
        return statistics.median(s.rate for s in self.samples)

    @property
    def cpu_ms_per_page(self) -> float:
        return statistics.median(1000 * s.cpu / s.pages for s in self.samples)

    @property
    def calls_per_page(self) -> float:
        return statistics.median(s.redis_calls / s.pages for s in self.samples)

    @property
    def round_trips_per_page(self) -> float:
        return statistics.median(s.round_trips / s.pages for s in self.samples)

    @property
    def reactor_round_trips_per_page(self) -> float:
        return statistics.median(s.reactor_round_trips / s.pages for s in self.samples)


def redis_calls(client: redis.Redis | RedisCluster) -> int:
    if isinstance(client, RedisCluster):  # one dict per primary
        per_node = client.info("commandstats", target_nodes=RedisCluster.PRIMARIES)
        stats_list = list(per_node.values())
    else:
        stats_list = [client.info("commandstats")]
    return sum(
        v["calls"]
        for stats in stats_list
        for k, v in stats.items()
        if not k.endswith(("info", "config", "cluster", "command"))
    )


def crawl_once(
    redis_url: str,
    settings: dict[str, str],
    nodes: int,
    workdir: Path,
    *,
    spider: str = "shop",
    spider_args: dict[str, str] | None = None,
    env: dict[str, str] | None = None,
    cluster: bool = False,
    crawl: str = "",
    start_path: str = "/",
) -> Sample:
    """One measured crawl of the demo shop (``crawl``: seeded under that crawl id;
    ``start_path`` a page the shop does not have: what a node costs to start and
    stop, one 404 fetched)."""
    client: redis.Redis | RedisCluster
    if cluster:
        client = cluster_at(redis_url)
        client.flushall(target_nodes=RedisCluster.PRIMARIES)
        client.config_resetstat(target_nodes=RedisCluster.PRIMARIES)
        settings = {**settings, "REDIS_CLUSTER": "True"}
    else:
        client = redis_at(redis_url)
        client.flushall()
        client.config_resetstat()
    site = services.start_demo_site()
    try:
        url = site.url + start_path
        start = json.dumps({"url": url, "crawl": crawl}) if crawl else url
        client.lpush(f"{{{spider}}}:start_urls" if cluster else f"{spider}:start_urls", start)
        if spider == "plain_shop":  # no Redis: its start URL is an argument
            spider_args = {**(spider_args or {}), "start": url}
        settings = {k: v.replace("{workdir}", str(workdir)) for k, v in settings.items()}
        common = {
            "CONCURRENT_REQUESTS": CONCURRENCY,
            "CONCURRENT_REQUESTS_PER_DOMAIN": CONCURRENCY,
            "MAX_IDLE_TIME_BEFORE_CLOSE": 1,
            "ITEMS_DIR": workdir,
            "LOG_LEVEL": "WARNING",
        }
        logs = [workdir / f"node-{n}.log" for n in range(nodes)]
        trips = [workdir / f"node-{n}.trips.json" for n in range(nodes)]
        procs = []
        for log, trips_file in zip(logs, trips, strict=True):
            log.unlink(missing_ok=True)
            trips_file.unlink(missing_ok=True)
            procs.append(
                services.start_node(
                    spider,
                    redis_url,
                    log=log,
                    settings={**common, **settings},
                    spider_args=spider_args,
                    env={**(env or {}), "ROUND_TRIPS_FILE": str(trips_file)},
                    runner="tools.count_round_trips",
                )
            )
        cpu = 0.0
        for proc, log in zip(procs, logs, strict=True):
            cpu += services.wait_node(proc, log)  # each node's own, not the demo site's
        with urllib.request.urlopen(site.url + "/__times", timeout=10) as response:
            times = json.load(response)
        stamps = sorted(t for path, ts in times.items() if path != "/robots.txt" for t in ts)
        stamps = stamps or [0.0]  # a start page the shop has not: no page counted
        counted = [json.loads(path.read_text()) for path in trips]
        return Sample(
            len(stamps),
            stamps[-1] - stamps[0],
            cpu,
            redis_calls(client),
            round_trips=sum(c["reactor"] + c["other"] for c in counted),
            reactor_round_trips=sum(c["reactor"] for c in counted),
        )
    finally:
        site.stop()
        client.close()
