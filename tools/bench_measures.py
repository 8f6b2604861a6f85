"""What ``make bench`` measures: the figures behind its sections (``tools/bench/``)."""

from __future__ import annotations

import compileall
import json
import random
import statistics
import time
import urllib.request
import uuid
from pathlib import Path

import pymongo
import redis

from extensions.pipelines.mongo import MongoStore
from servers import services
from servers.clients import redis_at
from tools.bench_crawl import (
    NO_ADDON,
    OURS,
    PLAIN,
    POLITE,
    STOCK,
    VARIANT_SPIDERS,
    VARIANTS,
    crawl_once,
)

MONGO_ITEMS = 2000  # documents per store measurement (nx-27017 slows as a collection grows)
THREE_CATEGORIES = {"allow": "/category/(books|garden|kitchen),/product/"}


def wake_latencies(redis_url: str, variant: str, workdir: Path, seed: int) -> list[float]:
    """Seconds from LPUSH of a start URL to its fetch, on a node idle for 6-11 s."""
    spider, settings = WAKE_VARIANTS[variant]
    pauses = random.Random(seed)
    client = redis_at(redis_url)
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
    """(settings, environment) of each variant of section 7: plain Scrapy as its
    users run it (its feed export), and this project's whole stack."""
    plain = VARIANTS[PLAIN]
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


REMOTE_DELAY_MS = 0.5  # per reply, through servers/latency_proxy.py (timers round it up to 1 ms)
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
    from extensions.frontier.redisops import execute
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
                execute(pipe)  # scripts go as EVALSHA: one Redis does not know yet runs in full
        execute(pipe)
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
        client = redis_at(server.url)
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
        client = redis_at(server.url)
        size = int(client.info("persistence")["aof_current_size"])
        client.close()
        return size / sample.pages
    finally:
        server.stop()


def round_trip_ms(url: str) -> float:
    """Median milliseconds of a PING through ``url``."""
    with redis_at(url) as client:
        client.ping()
        times = []
        for _ in range(100):
            began = time.perf_counter()
            client.ping()
            times.append(1000 * (time.perf_counter() - began))
    return statistics.median(times)
