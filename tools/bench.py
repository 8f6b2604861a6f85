"""``make bench``: side-by-side figures measured in one run on this machine.

Every variant crawls the bundled demo shop on loopback with the same spider
logic and concurrency; variants are run alternately and each figure is the
median of ``BENCH_RUNS`` runs (default 3). Speed is measured on the site's side:
pages served divided by the time from the first to the last request, so
start-up and close-down are left out. CPU is the node process's own user+sys
time per page; Redis commands per page come from ``INFO commandstats``, round trips from
redis-py on the node's side (``tools/count_round_trips.py``).
"""

from __future__ import annotations

import compileall
import json
import os
import random
import statistics
import sys
import tempfile
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pymongo
import redis
from redis.cluster import RedisCluster

from extensions.pipelines.mongo import MongoStore
from tools import pushback_bench, recrawl_bench, redis_ceiling, services, shard_spread

RUNS = int(os.environ.get("BENCH_RUNS", "3"))
MONGO_ITEMS = 2000  # documents per store measurement (nx-27017 slows as a collection grows)
THREE_CATEGORIES = {"allow": "/category/(books|garden|kitchen),/product/"}
CONCURRENCY = 32
NO_ADDON = '{"extensions.addon.DistributedAddon": null}'
STORE = '{"extensions.pipelines.itemstore.ItemStorePipeline": 900}'

BENCH_SPIDERS = "crawler.spiders,tools.bench_spiders"
# Items as a Scrapy user writes them without this project: a feed export ({workdir}
# is the run's directory).
FEED = json.dumps({"{workdir}/items.jsonl": {"format": "jsonlines", "overwrite": True}})
PLAIN = "plain Scrapy (memory queue, feed export)"
STOCK = "stock scrapy-redis (RedisSpider, feed export)"
VARIANTS: dict[str, dict[str, str]] = {
    PLAIN: {"ADDONS": NO_ADDON, "SPIDER_MODULES": BENCH_SPIDERS, "FEEDS": FEED},
    STOCK: {
        "ADDONS": NO_ADDON,
        "SPIDER_MODULES": BENCH_SPIDERS,
        "FEEDS": FEED,
        "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
        "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
    },
    "this project (leases, delayed retries, checkpoints)": {},
}
# plain Scrapy with the node's collector tuning: what the distributed layer itself costs
PLAIN_TUNED = "plain Scrapy + the node's collector tuning"
VARIANTS[PLAIN_TUNED] = {
    **VARIANTS[PLAIN],
    "EXTENSIONS": '{"extensions.gctuning.GarbageCollectorTuning": 100}',
    "SPIDER_MIDDLEWARES": '{"extensions.gctuning.ResponseRelease": 25}',
}
# the spider each variant runs: the same parsing on every side
VARIANT_SPIDERS = {PLAIN: "plain_shop", PLAIN_TUNED: "plain_shop", STOCK: "stock_shop"}
OURS = "this project (leases, delayed retries, checkpoints)"
# politeness decided at lease time, at a rate above what one node asks of the site
POLITE = "this project + CLUSTER_HOST_RATE=100000 (at lease)"
VARIANTS[POLITE] = {"CLUSTER_HOST_RATE": "100000"}
# what the node's collector tuning (extensions/gctuning.py) buys: Python's own thresholds
PYTHON_GC = "this project, Python's GC thresholds, no freeze"
VARIANTS[PYTHON_GC] = {"GC_FREEZE": "False", "GC_THRESHOLD": ""}


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
) -> Sample:
    client: redis.Redis | RedisCluster
    if cluster:
        client = RedisCluster.from_url(redis_url)
        client.flushall(target_nodes=RedisCluster.PRIMARIES)
        client.config_resetstat(target_nodes=RedisCluster.PRIMARIES)
        settings = {**settings, "REDIS_CLUSTER": "True"}
    else:
        client = redis.Redis.from_url(redis_url)
        client.flushall()
        client.config_resetstat()
    site = services.start_demo_site()
    try:
        client.lpush(
            f"{{{spider}}}:start_urls" if cluster else f"{spider}:start_urls", site.url + "/"
        )
        if spider == "plain_shop":  # no Redis: its start URL is an argument
            spider_args = {**(spider_args or {}), "start": site.url + "/"}
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
            # wait4 gives this node's own CPU time, not the demo site's
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            cpu += usage.ru_utime + usage.ru_stime
            if proc.returncode != 0:
                raise SystemExit(f"a bench node failed:\n{log.read_text()[-3000:]}")
        with urllib.request.urlopen(site.url + "/__times", timeout=10) as response:
            times = json.load(response)
        stamps = sorted(t for path, ts in times.items() if path != "/robots.txt" for t in ts)
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


def wake_latencies(redis_url: str, variant: str, workdir: Path, seed: int) -> list[float]:
    """Seconds from LPUSH of a start URL to its fetch, on a node idle for 6-11 s."""
    spider, settings = WAKE_VARIANTS[variant]
    pauses = random.Random(seed)
    client = redis.Redis.from_url(redis_url)
    client.flushall()
    site = services.start_demo_site()
    log = workdir / f"wake-{spider}.log"
    proc = services.start_node(
        spider,
        redis_url,
        log=log,
        settings={
            "MAX_IDLE_TIME_BEFORE_CLOSE": 0,
            "SPIDER_MODULES": "crawler.spiders,tools.bench_spiders",
            "ITEMS_DIR": workdir,
            **settings,
        },
    )
    latencies = []
    try:
        _wait(lambda: "Spider opened" in log.read_text(), 60, f"{spider} start", log)
        for n in range(1, WAKE_PUSHES + 1):
            time.sleep(6 + pauses.uniform(0, 5))  # long enough for any back-off to be at its top
            path = f"/about?push={n}"  # a page with no links to follow
            pushed = time.time()
            client.lpush(f"{spider}:start_urls", site.url + path)
            fetched: list[float] = []

            def fetched_yet(path=path, fetched=fetched) -> bool:
                with urllib.request.urlopen(site.url + "/__times", timeout=10) as response:
                    fetched.extend(json.load(response).get(path, []))
                return bool(fetched)

            _wait(fetched_yet, 30, f"{spider} fetching {path}", log)
            latencies.append(fetched[0] - pushed)
    finally:
        services.stop(proc, 30)
        site.stop()
        client.close()
    return latencies


def _wait(check, timeout: float, what: str, log: Path) -> None:
    try:
        services.wait_until(check, timeout, what)
    except RuntimeError as exc:
        raise SystemExit(f"bench: {exc}:\n{log.read_text()[-3000:]}") from None


def store_rates(uri: str, workdir: Path) -> dict[str, float]:
    """Items/s writing MONGO_ITEMS documents into an empty collection with a unique index."""
    docs = [
        {"url": f"http://bench/{i}", "title": "x" * 100, "price": i} for i in range(MONGO_ITEMS)
    ]
    client = pymongo.MongoClient(uri)
    rates = {}
    for name in STORE_VARIANTS:
        database = f"bench_{uuid.uuid4().hex[:8]}"
        began = time.perf_counter()
        if name == "per-item insert_one":
            collection = client[database]["items"]
            collection.create_index("url", unique=True)
            began = time.perf_counter()
            for doc in docs:
                collection.insert_one(dict(doc))
        else:
            mode = "insert" if "insert_many" in name else "upsert"
            store = MongoStore(uri, database, "items", mode=mode, journal_dir=workdir / "journal")
            store.open()
            began = time.perf_counter()
            for start in range(0, len(docs), 500):
                store.write([dict(doc) for doc in docs[start : start + 500]])
            store.close()
        rates[name] = MONGO_ITEMS / (time.perf_counter() - began)
        client.drop_database(database)
    client.close()
    return rates


STORE_VARIANTS = (
    "per-item insert_one",
    "this pipeline's store, upsert (default)",
    "this pipeline's store, insert_many",
)


def crawl_variants(uri: str) -> dict[str, dict[str, str]]:
    return {
        "items to JSON Lines": {},
        "items to MongoDB, this pipeline": {"MONGO_URI": uri},
        "items to MongoDB, per-item insert_one pipeline": {
            "MONGO_URI": uri,
            "ITEM_PIPELINES": json.dumps(
                {
                    "extensions.pipelines.itemstore.ItemStorePipeline": None,
                    "tools.bench_pipelines.InsertOnePipeline": 900,
                }
            ),
        },
    }


def stack_variants(proxy: str) -> dict[str, tuple[dict[str, str], dict[str, str]]]:
    """(settings, environment) of each variant of section 3."""
    plain = {"ADDONS": NO_ADDON, "ITEM_PIPELINES": STORE}
    return {
        "plain Scrapy, direct": (plain, {}),
        "plain Scrapy, through the proxy": (plain, {"http_proxy": proxy}),
        "this project, full stack through the proxy": (
            # rotation through the one proxy, a user agent per request, and the
            # cluster rate check on every request (at a limit never reached)
            {"ROTATING_PROXY_LIST": proxy, "CLUSTER_HOST_RATE": "100000"},
            {},
        ),
    }


SECTIONS = os.environ.get("BENCH_ONLY", "1,2,3,4,6,7,8,9,10,11,12,13,14,15,16,17").split(",")
REMOTE_DELAY_MS = 0.5  # per reply, through tools/latency_proxy.py (timers round it up to 1 ms)
REMOTE_VARIANTS: dict[str, dict[str, str]] = {
    STOCK: VARIANTS[STOCK],
    OURS: {},
    POLITE: {"CLUSTER_HOST_RATE": "100000"},
}
OBSERVABILITY = {
    "metrics and heartbeats on (METRICS_PORT, 2 s heartbeats)": {
        "METRICS_PORT": "0",  # replaced by a free port per run
        "METRICS_ADDRESS": "127.0.0.1",
        "NODE_HEARTBEAT_INTERVAL": "2",
    },
    "metrics off, heartbeats every 60 s": {"NODE_HEARTBEAT_INTERVAL": "60", "NODE_TIMEOUT": "600"},
}
WAKE_PUSHES = 3  # start URLs pushed to an idle node per run
WAKE_VARIANTS: dict[str, tuple[str, dict[str, str]]] = {
    "stock scrapy-redis (RedisSpider, its scheduler)": (
        "stock_idle",
        {
            "ADDONS": NO_ADDON,
            "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
            "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
        },
    ),
    OURS: ("shop", {}),
}
SPREAD_SHARDS = [1, 12, 48, 96]  # section 14: FRONTIER_SHARDS on a three-primary cluster
SPREAD_PAGES = 10_000
# section 15: one node's crawl on a single Redis and on a three-primary cluster
SHARDING_VARIANTS: dict[str, tuple[bool, dict[str, str]]] = {
    "single Redis (FRONTIER_SHARDS auto: 1)": (False, {}),
    "3-primary cluster, one slot (FRONTIER_SHARDS=1)": (True, {"FRONTIER_SHARDS": "1"}),
    "3-primary cluster, FRONTIER_SHARDS auto (96)": (True, {}),
}
CEILING_HOSTS = 500  # enough to put work in all 96 shards
SEEN_URLS = 1_000_000
QUEUED_REQUESTS = 100_000


def used_memory(client: redis.Redis) -> int:
    return int(client.info("memory")["used_memory"])


def seen_memory(client: redis.Redis) -> dict[str, float]:
    """Bytes of Redis memory per seen URL, for SEEN_URLS fingerprints."""
    import hashlib

    from extensions.frontier.bloom import BloomParams
    from extensions.frontier.frontier import Frontier
    from extensions.keys import SpiderKeys

    def digests():
        for i in range(SEEN_URLS):
            yield hashlib.sha1(b"http://shop/product/%d" % i).digest()

    results = {}
    for name in SEEN_VARIANTS:
        client.flushall()
        before = used_memory(client)
        if name.startswith("stock"):
            # scrapy-redis: 40-character hex fingerprints in one set
            pipe = client.pipeline(transaction=False)
            for n, fp in enumerate(digests(), 1):
                pipe.sadd("s:dupefilter", fp.hex())
                if n % 10_000 == 0:
                    pipe.execute()
            pipe.execute()
        else:
            # through the scheduler's own Lua script, exactly as a crawl writes them
            bloom = BloomParams.for_capacity(SEEN_URLS, 0.001) if "Bloom" in name else None
            frontier = Frontier(client, SpiderKeys.for_spider("s"), "bench", bloom)
            batch = []
            for fp in digests():
                batch.append((fp, "", 0, b""))  # the fingerprint alone: no request queued
                if len(batch) == 20_000:
                    frontier.enqueue(batch)
                    batch = []
        results[name] = (used_memory(client) - before) / SEEN_URLS
    client.flushall()
    return results


SEEN_VARIANTS = (
    "stock scrapy-redis (hex strings in one set)",
    "this project, exact (hashed buckets of 12-byte tails)",
    "this project, Bloom filter at 0.1% false positives",
)


def queued_memory(client: redis.Redis) -> dict[str, float]:
    """Bytes of Redis memory per queued request: stock pickle vs this project's JSON
    in its host queue; and per host, with QUEUED_REQUESTS hosts holding one request each."""
    from scrapy import Request
    from scrapy_redis import picklecompat

    from crawler.spiders.shop import ShopSpider
    from extensions.frontier.frontier import Frontier
    from extensions.frontier.serializer import dumps_request
    from extensions.keys import SpiderKeys

    spider = ShopSpider()
    results = {}
    per_request = "this project (JSON, in its host's queue)"
    per_host = f"this project, per host ({QUEUED_REQUESTS:,} hosts with one request each)"
    for name in ("stock scrapy-redis (pickle)", per_request, per_host):
        client.flushall()
        frontier = Frontier(client, SpiderKeys.for_spider("s"), "bench")
        before = used_memory(client)
        pipe = client.pipeline(transaction=False)
        for i in range(QUEUED_REQUESTS):
            host = f"host{i}.example" if name == per_host else "127.0.0.1"
            request = Request(
                f"http://{host}:8000/product/{i}",
                callback=spider.parse_product,
                meta={"depth": 3},
                headers={"Referer": f"http://{host}:8000/category/books?page=2"},
            )
            if name.startswith("stock"):
                pipe.zadd("s:requests", {picklecompat.dumps(request.to_dict(spider=spider)): 0})
            else:
                frontier.enqueue_on(pipe, [("", host, 0, dumps_request(request, spider))])
            if i % 10_000 == 0:
                pipe.execute()
        pipe.execute()
        results[name] = (used_memory(client) - before) / QUEUED_REQUESTS
    # a host's own cost: its queue key, its place among the ready hosts
    results[per_host] -= results[per_request]
    client.flushall()
    return results


def compile_project() -> None:
    """Bytecode for the project's modules, as an installed package has: with
    bytecode writing off (PYTHONDONTWRITEBYTECODE), every node start would
    compile them again, a cost a deployment does not pay."""
    for package in ("extensions", "crawler", "tools"):
        compileall.compile_dir(services.ROOT / package, quiet=1)


def main() -> None:
    compile_project()
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        work = Path(tmp)
        server = services.start_redis(work / "redis")
        proxy = services.start_forward_proxy()
        mongo = None
        uri = os.environ.get("TEST_MONGO_URI")
        if not uri and ("6" in SECTIONS or "16" in SECTIONS):
            mongo = services.start_mongo_wire(work / "mongo")
            uri = mongo.url
        try:
            results = {name: Figures() for name in VARIANTS}
            scale = {n: Figures() for n in (1, 2)}
            stack = {name: Figures() for name in stack_variants(proxy.url)}
            observability = {name: Figures() for name in OBSERVABILITY}
            seen: dict[str, float] = {}
            queued: dict[str, float] = {}
            stores: dict[str, list[float]] = {name: [] for name in STORE_VARIANTS}
            crawls = {name: Figures() for name in crawl_variants(uri or "")}
            wakes: dict[str, list[float]] = {name: [] for name in WAKE_VARIANTS}
            remote = {name: Figures() for name in REMOTE_VARIANTS}
            remote_rtt: list[float] = []
            aof: dict[str, list[float]] = {name: [] for name in AOF_VARIANTS}
            growth: dict[str, list[tuple[int, float, float, float]]] = {}
            ceiling: list[dict] = []
            spread: list[tuple[int, dict]] = []
            sharding = {name: Figures() for name in SHARDING_VARIANTS}
            sharded_ceiling: list[dict] = []
            freshness: dict[str, dict] = {}
            pushback: dict[str, dict] = {}
            cluster = None
            if "15" in SECTIONS:
                cluster = services.start_redis_cluster(work / "cluster-15")
            for run in range(RUNS):
                if "1" in SECTIONS:
                    for name, settings in VARIANTS.items():
                        spider = VARIANT_SPIDERS.get(name, "shop")
                        results[name].samples.append(
                            crawl_once(
                                server.url, settings, 1, work / f"items-{run}", spider=spider
                            )
                        )
                if "2" in SECTIONS:
                    for n in scale:
                        scale[n].samples.append(
                            crawl_once(server.url, {}, n, work / f"scale-{run}")
                        )
                if "7" in SECTIONS:
                    for name, (settings, env) in stack_variants(proxy.url).items():
                        stack[name].samples.append(
                            crawl_once(server.url, settings, 1, work / f"stack-{run}", env=env)
                        )
                if "8" in SECTIONS:
                    for name, settings in OBSERVABILITY.items():
                        if "METRICS_PORT" in settings:
                            settings = {**settings, "METRICS_PORT": str(services.free_port())}
                        observability[name].samples.append(
                            crawl_once(server.url, settings, 1, work / f"obs-{run}")
                        )
                if run == 0 and "4" in SECTIONS:  # memory is not noisy: measured once
                    with redis.Redis.from_url(server.url) as client:
                        seen = seen_memory(client)
                        queued = queued_memory(client)
                if "6" in SECTIONS:
                    for name, rate in store_rates(uri, work).items():
                        stores[name].append(rate)
                    for name, settings in crawl_variants(uri).items():
                        database = f"bench_{uuid.uuid4().hex[:8]}"
                        crawls[name].samples.append(
                            crawl_once(
                                server.url,
                                {**settings, "MONGO_DATABASE": database},
                                1,
                                work / f"store-{run}",
                                spider="site",
                                spider_args=THREE_CATEGORIES,
                            )
                        )
                        with pymongo.MongoClient(uri) as client:
                            client.drop_database(database)
                if "9" in SECTIONS:
                    for name in WAKE_VARIANTS:
                        wakes[name] += wake_latencies(server.url, name, work / f"wake-{run}", run)
                if "10" in SECTIONS:
                    latency = services.start_latency_proxy(server.url, REMOTE_DELAY_MS)
                    try:
                        remote_rtt.append(round_trip_ms(latency.url))
                        for name, settings in REMOTE_VARIANTS.items():
                            spider = VARIANT_SPIDERS.get(name, "shop")
                            remote[name].samples.append(
                                crawl_once(
                                    latency.url, settings, 1, work / f"remote-{run}", spider=spider
                                )
                            )
                    finally:
                        latency.stop()
                if run == 0 and "12" in SECTIONS:  # one long fill: measured once
                    growth = dupefilter_growth(work)
                if run == 0 and "13" in SECTIONS:
                    ceiling = [redis_ceiling.measure(server.url, n, 8.0) for n in (1, 2, 3)]
                if run == 0 and "14" in SECTIONS:  # placement is not noisy: measured once
                    cluster = services.start_redis_cluster(work / "cluster")
                    try:
                        spread = shard_spread.measure(cluster.url, SPREAD_SHARDS, SPREAD_PAGES)
                    finally:
                        cluster.stop()
                if "15" in SECTIONS and cluster is not None:
                    for name, (on_cluster, settings) in SHARDING_VARIANTS.items():
                        url = cluster.url if on_cluster else server.url
                        sharding[name].samples.append(
                            crawl_once(url, settings, 1, work / f"shard-{run}", cluster=on_cluster)
                        )
                    if run == 0:
                        for shards in (1, 96):
                            for clients in (1, 2):
                                sharded_ceiling.append(
                                    redis_ceiling.measure(
                                        cluster.url, clients, 8.0, shards=shards,
                                        cluster=True, hosts=CEILING_HOSTS,
                                    )
                                )  # fmt: skip
                if run == 0 and "16" in SECTIONS:
                    assert uri is not None
                    freshness = recrawl_bench.measure(server.url, uri, work / "fresh", CONCURRENCY)
                if run == 0 and "17" in SECTIONS:  # minutes a crawl: measured once
                    pushback = pushback_bench.measure(server.url, work / "pushback")
                if "11" in SECTIONS:
                    for n, name in enumerate(AOF_VARIANTS):  # a directory each: a fresh AOF
                        aof[name].append(aof_per_page(name, work / f"aof-{run}-{n}"))
                print(f"run {run + 1}/{RUNS} done", file=sys.stderr)
        finally:
            server.stop()
            proxy.stop()
            if cluster is not None:
                cluster.stop()
            if mongo is not None:
                mongo.stop()
    if "11" in SECTIONS:
        report_aof(aof)
    if "12" in SECTIONS:
        report_growth(growth)
    if "13" in SECTIONS:
        redis_ceiling.report(ceiling)
    if "14" in SECTIONS:
        shard_spread.report(spread, SPREAD_PAGES)
    if "15" in SECTIONS:
        report_sharding(sharding, sharded_ceiling)
    if "1" in SECTIONS:
        report(results)
    if "2" in SECTIONS:
        report_scale(scale)
    if "4" in SECTIONS:
        report_memory(seen, queued)
    if "1" in SECTIONS:
        report_commands(results)
    if "6" in SECTIONS:
        server_name = (
            "a real MongoDB (TEST_MONGO_URI)"
            if mongo is None
            else "nx-27017, the MongoDB-wire server over SQLite: not MongoDB's speed"
        )
        report_store(stores, crawls, server_name)
    if "7" in SECTIONS:
        report_stack(stack)
    if "8" in SECTIONS:
        print(f"\n8. Observability cost, one node, same shop crawl, median of {RUNS}")
        base = observability["metrics off, heartbeats every 60 s"].rate
        for name, figures in observability.items():
            print(f"   {name:52s} {figures.rate:8.0f} pages/s {figures.rate / base:6.2f}x")
    if "9" in SECTIONS:
        report_wake(wakes)
    if "10" in SECTIONS:
        report_remote(remote, statistics.median(remote_rtt), results)
    if "17" in SECTIONS:
        pushback_bench.report(pushback)
    if "16" in SECTIONS:
        recrawl_bench.report(
            freshness, "a real MongoDB" if mongo is None else "nx-27017, over SQLite"
        )


AOF_VARIANTS = (STOCK, OURS)
GROWTH_SIZES = (1_000_000, 10_000_000)  # seen URLs at which the dupefilter's costs are taken
GROWTH_PROBE = 20_000  # new URLs measured at each size
GROWTH_VARIANTS = (
    "stock scrapy-redis (SADD of hex strings)",
    "this project, exact (levels of small hashes)",
    "this project, Bloom at 0.1% (one BITFIELD per URL)",
)


def dupefilter_growth(workdir: Path) -> dict[str, list[tuple[int, float, float, float]]]:
    """Per variant and size: (seen URLs, AOF bytes per new URL, microseconds per
    new URL, memory bytes per seen URL), new URLs written as a crawl writes them."""
    import hashlib

    from extensions.frontier.bloom import BloomParams
    from extensions.frontier.frontier import Frontier
    from extensions.keys import SpiderKeys

    def digests(start: int, count: int):
        return [hashlib.sha1(b"http://shop/p/%d" % i).digest() for i in range(start, start + count)]

    results: dict[str, list[tuple[int, float, float, float]]] = {}
    for name in GROWTH_VARIANTS:
        server = services.start_redis(
            workdir / f"growth-{len(results)}", appendonly=True,
            extra_args=("--auto-aof-rewrite-percentage", "0", "--appendfsync", "no"),
        )  # fmt: skip
        client = redis.Redis.from_url(server.url)
        bloom = BloomParams.for_capacity(max(GROWTH_SIZES) * 2, 0.001) if "Bloom" in name else None
        frontier = Frontier(client, SpiderKeys.for_spider("s"), "bench", bloom)

        def write(fps: list[bytes], name=name, client=client, frontier=frontier) -> None:
            if name.startswith("stock"):
                pipe = client.pipeline(transaction=False)
                for fp in fps:
                    pipe.sadd("s:dupefilter", fp.hex())  # one command per link, as it does
                pipe.execute()
            else:
                frontier.enqueue([(fp, "", 0, b"") for fp in fps])

        results[name] = []
        filled = 0
        base = used_memory(client)
        # the Bloom filter's bits per URL do not depend on how full it is: one size does
        sizes = GROWTH_SIZES[:1] if bloom else GROWTH_SIZES
        try:
            for size in sizes:
                while filled < size:
                    step = min(200, size - filled)  # a flush's worth of links
                    write(digests(filled, step))
                    filled += step
                memory = (used_memory(client) - base) / filled
                before = int(client.info("persistence")["aof_current_size"])
                began = time.perf_counter()
                for start in range(filled, filled + GROWTH_PROBE, 200):
                    write(digests(start, 200))
                took = time.perf_counter() - began
                filled += GROWTH_PROBE
                after = int(client.info("persistence")["aof_current_size"])
                per_url = (after - before) / GROWTH_PROBE
                results[name].append((size, per_url, took / GROWTH_PROBE * 1e6, memory))
        finally:
            client.close()
            server.stop()
    return results


def report_growth(growth: dict[str, list[tuple[int, float, float, float]]]) -> None:
    print(f"\n12. Dupefilter cost as it grows: AOF bytes (what replicas receive too) and "
          f"client-side microseconds per new URL, over {GROWTH_PROBE:,} new URLs written "
          f"200 at a time, and Redis memory per seen URL")  # fmt: skip
    for name, rows in growth.items():
        for size, aof_bytes, micros, memory in rows:
            print(f"   {name:52s} at {size / 1e6:4.0f}M seen: {aof_bytes:7.1f} B/URL AOF "
                  f"{micros:7.2f} us/URL {memory:6.1f} B/URL memory")  # fmt: skip


def aof_per_page(name: str, workdir: Path) -> float:
    """Bytes Redis appends to its AOF (what every replica receives too) per page
    of the same crawl: enqueue, lease, release, heartbeats, checkpoints, all of it."""
    server = services.start_redis(
        workdir / "redis", appendonly=True, extra_args=("--auto-aof-rewrite-percentage", "0")
    )
    try:
        settings = VARIANTS[name]
        sample = crawl_once(
            server.url, settings, 1, workdir, spider=VARIANT_SPIDERS.get(name, "shop")
        )
        client = redis.Redis.from_url(server.url)
        size = int(client.info("persistence")["aof_current_size"])
        client.close()
        return size / sample.pages
    finally:
        server.stop()


def report_aof(aof: dict[str, list[float]]) -> None:
    print(f"\n11. AOF bytes per crawled page (the replication stream), one node, same crawl, "
          f"median of {RUNS}")  # fmt: skip
    for name, sizes in aof.items():
        print(f"   {name:52s} {statistics.median(sizes):8.0f} B/page")


def round_trip_ms(url: str) -> float:
    """Median milliseconds of a PING through ``url``."""
    with redis.Redis.from_url(url) as client:
        client.ping()
        times = []
        for _ in range(100):
            began = time.perf_counter()
            client.ping()
            times.append(1000 * (time.perf_counter() - began))
    return statistics.median(times)


def report_remote(remote: dict[str, Figures], rtt: float, local: dict[str, Figures]) -> None:
    print(f"\n10. One node, Redis {rtt:.2f} ms away (PING round trip through a delaying "
          f"proxy), median of {RUNS}")  # fmt: skip
    for name, figures in remote.items():
        line = f"   {name:52s} {figures.rate:8.0f} pages/s"
        if name in local and local[name].samples:
            line += f"   (Redis on loopback: {local[name].rate:.0f})"
        print(line)
    if remote[OURS].samples and remote[POLITE].samples:
        print(f"   with CLUSTER_HOST_RATE vs without, Redis away: "
              f"{remote[POLITE].rate / remote[OURS].rate:.2f}x")  # fmt: skip


def report_wake(wakes: dict[str, list[float]]) -> None:
    print(f"\n9. Seconds from pushing a start URL to its fetch, on a node idle for 6-11 s; "
          f"{WAKE_PUSHES * RUNS} pushes each")  # fmt: skip
    print(f"   {'variant':52s} {'median':>8s} {'max':>8s}")
    for name, latencies in wakes.items():
        print(f"   {name:52s} {statistics.median(latencies):8.2f} {max(latencies):8.2f}")


def report_memory(seen: dict[str, float], queued: dict[str, float]) -> None:
    print(f"\n3. Redis memory per seen URL, {SEEN_URLS:,} URLs (used_memory delta)")
    for name, per_url in seen.items():
        print(f"   {name:52s} {per_url:8.1f} B/URL   100M URLs: {per_url * 1e8 / 2**30:6.1f} GiB")
    print(f"\n4. Redis memory per queued request, {QUEUED_REQUESTS:,} product requests")
    for name, per_request in queued.items():
        unit = "B/host, over its requests" if "per host" in name else "B/request"
        print(f"   {name:52s} {per_request:8.1f} {unit}")


def report_commands(results: dict[str, Figures]) -> None:
    print("\n5. Redis traffic per crawled page, one node, section 1's runs: commands from "
          "INFO commandstats (Lua's inner calls included); round trips counted in redis-py, "
          "all threads and the reactor thread alone")  # fmt: skip
    print(f"   {'variant':52s} {'commands':>8s} {'round trips':>12s} {'on reactor':>11s}")
    stock = results[STOCK]
    ours = results[OURS]
    polite = results[POLITE]
    shown = ((STOCK, stock), (OURS, ours), (POLITE, polite))
    for name, figures in shown:
        print(f"   {name:52s} {figures.calls_per_page:8.2f} {figures.round_trips_per_page:12.3f} "
              f"{figures.reactor_round_trips_per_page:11.3f}")  # fmt: skip
    if ours.round_trips_per_page:
        print(f"   round trips, stock / this project: "
              f"{stock.round_trips_per_page / ours.round_trips_per_page:.1f}x")  # fmt: skip


def report_stack(stack: dict[str, Figures]) -> None:
    print(f"\n7. Middleware stack overhead, one node, same shop crawl, median of {RUNS}")
    base = stack["plain Scrapy, through the proxy"].rate
    for name, figures in stack.items():
        print(f"   {name:52s} {figures.rate:8.0f} pages/s {figures.rate / base:6.2f}x "
              f"{figures.cpu_ms_per_page:8.2f} CPU ms/page")  # fmt: skip


def report_store(stores: dict[str, list[float]], crawls: dict[str, Figures], server: str) -> None:
    print(f"\n6. Item store, {MONGO_ITEMS} items into an empty collection, on {server}; "
          f"median of {RUNS}")  # fmt: skip
    base = statistics.median(stores["per-item insert_one"])
    for name, rates in stores.items():
        rate = statistics.median(rates)
        print(f"   {name:52s} {rate:8.0f} items/s {rate / base:6.2f}x")
    pages = int(next(iter(crawls.values())).median("pages"))
    print(f"   the crawl ({pages} pages, site spider) with each:")
    jsonl = crawls["items to JSON Lines"].rate
    for name, figures in crawls.items():
        print(f"   {name:52s} {figures.rate:8.0f} pages/s {figures.rate / jsonl:6.2f}x")


def report(results: dict[str, Figures]) -> None:
    pages = int(next(iter(results.values())).median("pages"))
    print(f"\n1. One node, {pages} pages of the demo shop, CONCURRENT_REQUESTS={CONCURRENCY}, "
          f"median of {RUNS} alternating runs, {os.cpu_count()} cores")  # fmt: skip
    print(f"   {'variant':52s} {'pages/s':>8s} {'ratio':>7s} {'CPU ms/page':>12s} "
          f"{'Redis cmds/page':>16s}")  # fmt: skip
    plain = results[PLAIN].rate
    for name, figures in results.items():
        calls = f"{figures.calls_per_page:16.2f}" if figures.calls_per_page else f"{'-':>16s}"
        print(f"   {name:52s} {figures.rate:8.0f} {figures.rate / plain:6.2f}x "
              f"{figures.cpu_ms_per_page:12.2f} {calls}")  # fmt: skip
    ours = results["this project (leases, delayed retries, checkpoints)"].rate
    stock = results[STOCK].rate
    print(f"   this project vs stock scrapy-redis: {ours / stock:.2f}x; "
          f"vs plain Scrapy: {ours / plain:.2f}x; with CLUSTER_HOST_RATE vs without: "
          f"{results[POLITE].rate / ours:.2f}x; the collector tuning: "
          f"{ours / results[PYTHON_GC].rate:.2f}x")  # fmt: skip
    tuned = results[PLAIN_TUNED]
    layer = results[OURS].cpu_ms_per_page - tuned.cpu_ms_per_page
    print(f"   the distributed layer's own cost, against plain Scrapy with the same tuning: "
          f"{layer:+.2f} ms CPU a page ({layer / tuned.cpu_ms_per_page:+.0%}), "
          f"{results[OURS].rate / tuned.rate:.2f}x its rate")  # fmt: skip


def report_sharding(sharding: dict[str, Figures], ceiling: list[dict]) -> None:
    print(f"\n15. The cost of sharding: one node, the shop crawl (one host), median of {RUNS}")
    base = sharding[next(iter(sharding))]
    for name, figures in sharding.items():
        print(f"   {name:50s} {figures.rate:8.0f} pages/s {figures.rate / base.rate:6.2f}x   "
              f"{figures.cpu_ms_per_page:5.2f} CPU ms/page   "
              f"{figures.calls_per_page:5.2f} Redis commands/page")  # fmt: skip
    print(f"   The Redis ceiling on the cluster (section 13's load generator, {CEILING_HOSTS} "
          "hosts; Redis and the clients share this machine's cores):")  # fmt: skip
    for row in ceiling:
        cpu = " / ".join(f"{part:.0%}" for part in row["per_primary"])
        print(f"   FRONTIER_SHARDS={row['shards']:<3} {row['clients']} client"
              f"{'s' if row['clients'] > 1 else ' '} {row['pages_per_s']:7.0f} pages/s   "
              f"primaries' CPU {cpu}   -> {row['ceiling']:6.0f} pages/s per busy core")  # fmt: skip


def report_scale(scale: dict[int, Figures]) -> None:
    print(f"\n2. Nodes on one Redis (this project), same site, median of {RUNS}")
    one = scale[1].rate
    for n, figures in scale.items():
        print(f"   {n} node{'s' if n > 1 else ' '}  {figures.rate:8.0f} pages/s  "
              f"{figures.rate / one:5.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
