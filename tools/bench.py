"""``make bench``: side-by-side figures measured in one run on this machine.

Every section is registered once below (``SECTIONS``), under its number;
``BENCH_ONLY=1,3`` picks sections and ``python -m tools.bench --list`` names them.
Crawl sections run the bundled demo shop on loopback with the same spider logic and
concurrency (``tools/bench_crawl.py``); their variants are run alternately and each
figure is the median of ``BENCH_RUNS`` runs (default 3). A section whose figures are
not noisy, or that takes minutes, is measured in the first run only.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import uuid
from pathlib import Path

import pymongo

from servers import services
from servers.clients import redis_at
from tools import (
    bench_sections,  # noqa: F401  (sections 12 to 27 register)
    duplicates_bench,  # noqa: F401  (section 29 registers)
    links_bench,  # noqa: F401  (section 28 registers)
)
from tools.bench_base import (
    SECTIONS,
    Bench,
    Section,
    mongo_server,
    section,
)
from tools.bench_crawl import (
    RUNS,
    VARIANT_SPIDERS,
    Figures,
    crawl_once,
)
from tools.bench_measures import (
    AOF_VARIANTS,
    OBSERVABILITY,
    REMOTE_DELAY_MS,
    REMOTE_VARIANTS,
    STORE_VARIANTS,
    THREE_CATEGORIES,
    WAKE_VARIANTS,
    aof_per_page,
    compile_project,
    crawl_variants,
    queued_memory,
    round_trip_ms,
    seen_memory,
    stack_variants,
    store_rates,
    wake_latencies,
)
from tools.bench_reports import (
    report,
    report_aof,
    report_commands,
    report_queued_memory,
    report_remote,
    report_scale,
    report_seen_memory,
    report_stack,
    report_store,
    report_wake,
)


@section(1, "one node against plain Scrapy and stock scrapy-redis: pages/s, CPU, commands")
class OneNode(Section):
    def measure(self, bench: Bench, run: int) -> None:
        bench.crawl_one_node(run)

    def report(self, bench: Bench) -> None:
        report(bench.one_node, bench.start_cpu)


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
        with redis_at(bench.redis_url) as client:
            self.seen = seen_memory(client)

    def report(self, bench: Bench) -> None:
        report_seen_memory(self.seen)


@section(4, "Redis memory per queued request and per host")
class QueuedMemory(Section):
    once = True

    def measure(self, bench: Bench, run: int) -> None:
        with redis_at(bench.redis_url) as client:
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
