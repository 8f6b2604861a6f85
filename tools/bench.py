"""``make bench``: side-by-side figures measured in one run on this machine.

Every section is registered once below (``SECTIONS``), under its number;
``BENCH_ONLY=1,3`` picks sections and ``python -m tools.bench --list`` names them.
Crawl sections run the bundled demo shop on loopback with the same spider logic and
concurrency (``tools/bench_crawl.py``); their variants are run alternately and each
figure is the median of ``BENCH_RUNS`` runs (default 3). A section whose figures are
not noisy, or that takes minutes, is measured in the first run only.
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
from pathlib import Path

import pymongo
import redis

from extensions.pipelines.mongo import MongoStore
from tools import (
    console_bench,
    crawls_bench,
    evidence_bench,
    overflow_bench,
    pushback_bench,
    recrawl_bench,
    redis_ceiling,
    render_bench,
    services,
    shard_spread,
)
from tools.bench_crawl import (
    CONCURRENCY,
    NO_ADDON,
    OURS,
    PLAIN,
    PLAIN_TUNED,
    POLITE,
    PYTHON_GC,
    RUNS,
    STOCK,
    VARIANT_SPIDERS,
    VARIANTS,
    Figures,
    crawl_once,
)

MONGO_ITEMS = 2000  # documents per store measurement (nx-27017 slows as a collection grows)
THREE_CATEGORIES = {"allow": "/category/(books|garden|kitchen),/product/"}


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


def report_seen_memory(seen: dict[str, float]) -> None:
    print(f"\n3. Redis memory per seen URL, {SEEN_URLS:,} URLs (used_memory delta)")
    for name, per_url in seen.items():
        print(f"   {name:52s} {per_url:8.1f} B/URL   100M URLs: {per_url * 1e8 / 2**30:6.1f} GiB")


def report_queued_memory(queued: dict[str, float]) -> None:
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


WITHOUT_CRAWL_ID = "without a crawl id (as before)"
WITH_CRAWL_ID = "under a crawl id (seeded with --crawl)"
CRAWL_ID_VARIANTS = {WITHOUT_CRAWL_ID: "", WITH_CRAWL_ID: "bench"}


class Bench:
    """What the sections of one ``make bench`` share: its directory, its servers,
    and section 1's crawls (which sections 5 and 10 read too)."""

    def __init__(self, work: Path, redis_url: str, proxy_url: str, mongo_uri: str | None):
        self.work = work
        self.redis_url = redis_url
        self.proxy_url = proxy_url
        self.mongo_uri = mongo_uri
        self.one_node = {name: Figures() for name in VARIANTS}
        self._one_node_runs: set[int] = set()

    def crawl_one_node(self, run: int) -> None:
        """Section 1's crawls for this run, once however many sections ask."""
        if run in self._one_node_runs:
            return
        self._one_node_runs.add(run)
        for name, settings in VARIANTS.items():
            spider = VARIANT_SPIDERS.get(name, "shop")
            self.one_node[name].samples.append(
                crawl_once(self.redis_url, settings, 1, self.work / f"items-{run}", spider=spider)
            )


class Section:
    """One numbered comparison: ``measure`` is called in every run (the first only
    when ``once``), ``report`` after the last."""

    number: int
    title: str
    once = False
    needs_mongo = False

    def measure(self, bench: Bench, run: int) -> None:
        raise NotImplementedError

    def report(self, bench: Bench) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Stops what the section kept running from one run to the next."""


SECTIONS: dict[int, type[Section]] = {}


def section(number: int, title: str):
    """Registers a section under its number, which no other section may have."""

    def register(cls: type[Section]) -> type[Section]:
        if number in SECTIONS:
            raise RuntimeError(f"bench section {number} registered twice")
        cls.number, cls.title = number, title
        SECTIONS[number] = cls
        return cls

    return register


@section(1, "one node against plain Scrapy and stock scrapy-redis: pages/s, CPU, commands")
class OneNode(Section):
    def measure(self, bench: Bench, run: int) -> None:
        bench.crawl_one_node(run)

    def report(self, bench: Bench) -> None:
        report(bench.one_node)


@section(2, "one and two nodes on one Redis")
class Nodes(Section):
    def __init__(self) -> None:
        self.scale = {n: Figures() for n in (1, 2)}

    def measure(self, bench: Bench, run: int) -> None:
        for n, figures in self.scale.items():
            figures.samples.append(crawl_once(bench.redis_url, {}, n, bench.work / f"scale-{run}"))

    def report(self, bench: Bench) -> None:
        report_scale(self.scale)


@section(3, "Redis memory per seen URL: stock set, exact dupefilter, Bloom filter")
class SeenMemory(Section):
    once = True  # memory is not noisy

    def measure(self, bench: Bench, run: int) -> None:
        with redis.Redis.from_url(bench.redis_url) as client:
            self.seen = seen_memory(client)

    def report(self, bench: Bench) -> None:
        report_seen_memory(self.seen)


@section(4, "Redis memory per queued request and per host")
class QueuedMemory(Section):
    once = True

    def measure(self, bench: Bench, run: int) -> None:
        with redis.Redis.from_url(bench.redis_url) as client:
            self.queued = queued_memory(client)

    def report(self, bench: Bench) -> None:
        report_queued_memory(self.queued)


@section(5, "Redis commands and round trips per page, from section 1's crawls")
class RedisTraffic(OneNode):
    def report(self, bench: Bench) -> None:
        report_commands(bench.one_node)


@section(6, "the MongoDB item store against per-item inserts and JSON Lines")
class ItemStore(Section):
    needs_mongo = True

    def __init__(self) -> None:
        self.stores: dict[str, list[float]] = {name: [] for name in STORE_VARIANTS}
        self.crawls = {name: Figures() for name in crawl_variants("")}

    def measure(self, bench: Bench, run: int) -> None:
        assert bench.mongo_uri is not None
        for name, rate in store_rates(bench.mongo_uri, bench.work).items():
            self.stores[name].append(rate)
        for name, settings in crawl_variants(bench.mongo_uri).items():
            database = f"bench_{uuid.uuid4().hex[:8]}"
            self.crawls[name].samples.append(
                crawl_once(
                    bench.redis_url,
                    {**settings, "MONGO_DATABASE": database},
                    1,
                    bench.work / f"store-{run}",
                    spider="site",
                    spider_args=THREE_CATEGORIES,
                )
            )
            with pymongo.MongoClient(bench.mongo_uri) as client:
                client.drop_database(database)

    def report(self, bench: Bench) -> None:
        report_store(self.stores, self.crawls, mongo_server(bench))


@section(7, "the middleware stack (proxies, user agents, rate checks) through a proxy")
class MiddlewareStack(Section):
    def __init__(self) -> None:
        self.stack: dict[str, Figures] = {}

    def measure(self, bench: Bench, run: int) -> None:
        workdir = bench.work / f"stack-{run}"
        for name, (settings, env) in stack_variants(bench.proxy_url).items():
            spider = "plain_shop" if name.startswith("plain") else "shop"
            self.stack.setdefault(name, Figures()).samples.append(
                crawl_once(bench.redis_url, settings, 1, workdir, env=env, spider=spider)
            )

    def report(self, bench: Bench) -> None:
        report_stack(self.stack)


@section(8, "what metrics and heartbeats cost")
class Observability(Section):
    def __init__(self) -> None:
        self.figures = {name: Figures() for name in OBSERVABILITY}

    def measure(self, bench: Bench, run: int) -> None:
        for name, settings in OBSERVABILITY.items():
            if "METRICS_PORT" in settings:
                settings = {**settings, "METRICS_PORT": str(services.free_port())}
            self.figures[name].samples.append(
                crawl_once(bench.redis_url, settings, 1, bench.work / f"obs-{run}")
            )

    def report(self, bench: Bench) -> None:
        print(f"\n8. Observability cost, one node, same shop crawl, median of {RUNS}")
        base = self.figures["metrics off, heartbeats every 60 s"].rate
        for name, figures in self.figures.items():
            print(f"   {name:52s} {figures.rate:8.0f} pages/s {figures.rate / base:6.2f}x")


@section(9, "seconds from a pushed start URL to its fetch on an idle node")
class Wake(Section):
    def __init__(self) -> None:
        self.wakes: dict[str, list[float]] = {name: [] for name in WAKE_VARIANTS}

    def measure(self, bench: Bench, run: int) -> None:
        workdir = bench.work / f"wake-{run}"
        for name in WAKE_VARIANTS:
            self.wakes[name] += wake_latencies(bench.redis_url, name, workdir, run)

    def report(self, bench: Bench) -> None:
        report_wake(self.wakes)


@section(10, "one node with Redis a round trip away")
class RemoteRedis(Section):
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


@section(11, "AOF bytes per crawled page: stock scrapy-redis and this project")
class AofPerPage(Section):
    def __init__(self) -> None:
        self.aof: dict[str, list[float]] = {name: [] for name in AOF_VARIANTS}

    def measure(self, bench: Bench, run: int) -> None:
        for n, name in enumerate(AOF_VARIANTS):  # a directory each: a fresh AOF
            self.aof[name].append(aof_per_page(name, bench.work / f"aof-{run}-{n}"))

    def report(self, bench: Bench) -> None:
        report_aof(self.aof)


@section(12, "the dupefilter's AOF bytes, time and memory at 1M and 10M seen URLs")
class DupefilterGrowth(Section):
    once = True  # one long fill

    def measure(self, bench: Bench, run: int) -> None:
        self.growth = dupefilter_growth(bench.work)

    def report(self, bench: Bench) -> None:
        report_growth(self.growth)


@section(13, "the Redis ceiling: the frontier's scripts driven without Scrapy")
class RedisCeiling(Section):
    once = True

    def measure(self, bench: Bench, run: int) -> None:
        self.rows = [redis_ceiling.measure(bench.redis_url, n, 8.0) for n in (1, 2, 3)]

    def report(self, bench: Bench) -> None:
        redis_ceiling.report(self.rows)


@section(14, "one crawl's spread over a three-primary Redis Cluster")
class ShardSpread(Section):
    once = True  # placement is not noisy

    def measure(self, bench: Bench, run: int) -> None:
        cluster = services.start_redis_cluster(bench.work / "cluster")
        try:
            self.spread = shard_spread.measure(cluster.url, SPREAD_SHARDS, SPREAD_PAGES)
        finally:
            cluster.stop()

    def report(self, bench: Bench) -> None:
        shard_spread.report(self.spread, SPREAD_PAGES)


@section(15, "the cost of sharding: a single Redis against a cluster")
class Sharding(Section):
    def __init__(self) -> None:
        self.sharding = {name: Figures() for name in SHARDING_VARIANTS}
        self.ceiling: list[dict] = []
        self.cluster: services.RedisCluster | None = None

    def measure(self, bench: Bench, run: int) -> None:
        if self.cluster is None:  # kept for every run, stopped after the last
            self.cluster = services.start_redis_cluster(bench.work / "cluster-15")
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


@section(16, "keeping a crawl fresh: recrawls with and without validators")
class Freshness(Section):
    once = True
    needs_mongo = True

    def measure(self, bench: Bench, run: int) -> None:
        assert bench.mongo_uri is not None
        self.freshness = recrawl_bench.measure(
            bench.redis_url, bench.mongo_uri, bench.work / "fresh", CONCURRENCY
        )

    def report(self, bench: Bench) -> None:
        recrawl_bench.report(self.freshness, mongo_server(bench))


@section(17, "hosts that push back: the cluster slowing down for them")
class Pushback(Section):
    once = True  # minutes a crawl

    def measure(self, bench: Bench, run: int) -> None:
        self.pushback = pushback_bench.measure(bench.redis_url, bench.work / "pushback")

    def report(self, bench: Bench) -> None:
        pushback_bench.report(self.pushback)


@section(22, "host pushback on evidence: broken pages, a limiter, an overloaded and a banning host")
class PushbackEvidence(Section):
    once = True  # two crawls of a few minutes

    def measure(self, bench: Bench, run: int) -> None:
        self.rows = evidence_bench.measure(bench.redis_url, bench.work / "evidence")

    def report(self, bench: Bench) -> None:
        evidence_bench.report(self.rows)


@section(18, "crawl ids: their cost per page, and a paused crawl's weight on the others")
class CrawlIds(Section):
    def __init__(self) -> None:
        self.figures = {name: Figures() for name in CRAWL_ID_VARIANTS}
        self.paused: list[dict[str, float]] = []

    def measure(self, bench: Bench, run: int) -> None:
        for name, crawl in CRAWL_ID_VARIANTS.items():
            self.figures[name].samples.append(
                crawl_once(bench.redis_url, {}, 1, bench.work / f"crawl-ids-{run}", crawl=crawl)
            )
        if run == 0:
            self.paused = crawls_bench.measure(bench.redis_url)

    def report(self, bench: Bench) -> None:
        print(f"\n18. Crawl ids, one node, the shop crawl, median of {RUNS}")
        print(f"   {'variant':40s} {'pages/s':>8s} {'CPU ms/page':>12s} {'commands':>9s} "
              f"{'round trips':>12s}")  # fmt: skip
        base = self.figures[WITHOUT_CRAWL_ID]
        for name, figures in self.figures.items():
            trips = figures.round_trips_per_page
            print(f"   {name:40s} {figures.rate:8.0f} {figures.cpu_ms_per_page:12.2f} "
                  f"{figures.calls_per_page:9.2f} {trips:12.3f}")  # fmt: skip
        ours = self.figures[WITH_CRAWL_ID]
        if base.rate:
            print(f"   under a crawl id / without: {ours.rate / base.rate:.2f}x pages/s, "
                  f"{ours.calls_per_page - base.calls_per_page:+.2f} commands a page")  # fmt: skip
        crawls_bench.report(self.paused)


@section(19, "rendering: a render node against scrapy-playwright; what RENDER_AUTO saves")
class Rendering(Section):
    once = True  # a few minutes of browsing; its figures are far apart

    def measure(self, bench: Bench, run: int) -> None:
        if render_bench.find_browser() is None:
            self.rendered, self.auto = {}, {}
            return
        self.rendered = render_bench.rendering(bench.redis_url, bench.work / "render")
        self.auto = render_bench.auto_mode(bench.redis_url, bench.work / "render-auto")

    def report(self, bench: Bench) -> None:
        if not self.rendered:
            print("\n19. Rendering: skipped, no Chromium on this machine (make system-tools)")
            return
        render_bench.report(self.rendered, self.auto)


@section(20, "the web console: Redis commands and time per page as the crawl grows")
class Console(Section):
    once = True  # filling a million requests takes a while; the figures are counts

    def measure(self, bench: Bench, run: int) -> None:
        self.rows = console_bench.measure(bench.redis_url, bench.work / "console")

    def report(self, bench: Bench) -> None:
        print("\n20. The web console, pages served by scrapy console against one Redis")
        console_bench.report(self.rows)


@section(21, "a frontier bigger than Redis: memory and costs per request at 1M and 10M queued")
class Overflow(Section):
    once = True  # two long fills per size; the figures are memory and per-request costs
    needs_mongo = True

    def measure(self, bench: Bench, run: int) -> None:
        assert bench.mongo_uri is not None
        self.rows = overflow_bench.measure(bench.redis_url, bench.mongo_uri)

    def report(self, bench: Bench) -> None:
        print(f"\n21. A frontier bigger than Redis (FRONTIER_OVERFLOW), {mongo_server(bench)}")
        overflow_bench.report(self.rows)


def mongo_server(bench: Bench) -> str:
    if os.environ.get("TEST_MONGO_URI"):
        return "a real MongoDB (TEST_MONGO_URI)"
    return "nx-27017, the MongoDB-wire server over SQLite: not MongoDB's speed"


def chosen_sections(only: str | None) -> list[Section]:
    """The sections ``BENCH_ONLY`` names (all when unset), in number order."""
    if not only:
        return [cls() for _, cls in sorted(SECTIONS.items())]
    numbers = []
    for part in only.split(","):
        if not part.strip().isdigit() or int(part) not in SECTIONS:
            known = ", ".join(map(str, SECTIONS))
            raise SystemExit(f"BENCH_ONLY: no section {part.strip()!r}; there are {known}")
        numbers.append(int(part))
    return [SECTIONS[number]() for number in sorted(set(numbers))]


def main(argv: list[str]) -> None:
    if "--list" in argv:
        for number, cls in sorted(SECTIONS.items()):
            print(f"{number:3d}. {cls.title}")
        return
    sections = chosen_sections(os.environ.get("BENCH_ONLY"))
    compile_project()
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        work = Path(tmp)
        server = services.start_redis(work / "redis")
        proxy = services.start_forward_proxy()
        uri = os.environ.get("TEST_MONGO_URI")
        mongo = None
        if not uri and any(s.needs_mongo for s in sections):
            mongo = services.start_mongo_wire(work / "mongo")
            uri = mongo.url
        bench = Bench(work, server.url, proxy.url, uri)
        try:
            for run in range(RUNS):
                for chosen in sections:
                    if run == 0 or not chosen.once:
                        chosen.measure(bench, run)
                print(f"run {run + 1}/{RUNS} done", file=sys.stderr)
        finally:
            for chosen in sections:
                chosen.close()
            server.stop()
            proxy.stop()
            if mongo is not None:
                mongo.stop()
    for chosen in sections:
        chosen.report(bench)


if __name__ == "__main__":
    main(sys.argv[1:])
