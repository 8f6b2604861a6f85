"""``make bench`` sections 12 to 27: growth, sharding, recrawls, pushback, crawl ids,
rendering, the console, the overflow, levels, one page one URL, trust, host ranks, WARC
(registered in ``tools/bench_base.py``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from servers import redis_cluster
from servers.services import ROOT
from tools import (
    console_bench,
    crawls_bench,
    evidence_bench,
    levels_bench,
    overflow_bench,
    pushback_bench,
    ranks_bench,
    recrawl_bench,
    redis_ceiling,
    render_bench,
    shard_spread,
    trust_bench,
    urls_bench,
    warc_bench,
)
from tools.bench_base import (
    CRAWL_ID_VARIANTS,
    WITH_CRAWL_ID,
    WITHOUT_CRAWL_ID,
    Bench,
    Section,
    mongo_server,
    section,
)
from tools.bench_crawl import (
    CONCURRENCY,
    RUNS,
    Figures,
    Sample,
    crawl_once,
)
from tools.bench_measures import (
    CEILING_HOSTS,
    SHARDING_VARIANTS,
    SPREAD_PAGES,
    SPREAD_SHARDS,
    dupefilter_growth,
)
from tools.bench_reports import (
    report_growth,
    report_sharding,
)


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
        self.aof = redis_ceiling.aof_bytes_per_page(bench.redis_url)

    def report(self, bench: Bench) -> None:
        redis_ceiling.report(self.rows, self.aof)


@section(14, "one crawl's spread over a three-primary Redis Cluster")
class ShardSpread(Section):
    once = True  # placement is not noisy

    def measure(self, bench: Bench, run: int) -> None:
        cluster = redis_cluster.start_redis_cluster(bench.work / "cluster")
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


@section(23, "politeness per domain and address: lease cost at 1M hosts, Redis bytes per host")
class Levels(Section):
    once = True  # a million hosts filled three times; the figures are counts and bytes

    def measure(self, bench: Bench, run: int) -> None:
        self.result = levels_bench.measure(bench.redis_url)

    def report(self, bench: Bench) -> None:
        print("\n23. Politeness per registered domain and per server address")
        levels_bench.report(self.result)


@section(24, "one page, one URL: fetches and items per page, chain CPU, digest bytes at 10M")
class Urls(Section):
    once = True  # ten million digests filled; the figures are counts, bytes and CPU per URL

    def measure(self, bench: Bench, run: int) -> None:
        self.result = urls_bench.measure(bench.redis_url, bench.work / "urls")

    def report(self, bench: Bench) -> None:
        print("\n24. One page, one URL: the normalizer chain, content duplicates, canonicals")
        urls_bench.report(self.result)


@section(25, "a crawler sites can trust: signing a request, reading a page's robots directives")
class Trust(Section):
    once = True  # CPU per request and per page, measured in this process

    def measure(self, bench: Bench, run: int) -> None:
        self.result = trust_bench.measure()

    def report(self, bench: Bench) -> None:
        print("\n25. A crawler sites can trust")
        trust_bench.report(self.result)


@section(26, "what to fetch first: top sites' coverage by importance, sketch bytes, lease cost")
class Ranks(Section):
    once = True  # a million hosts filled twice, two crawls of a generated web

    def measure(self, bench: Bench, run: int) -> None:
        self.result = ranks_bench.measure(bench.redis_url, bench.work / "ranks")

    def report(self, bench: Bench) -> None:
        print('\n26. What to fetch first: host ranks and FRONTIER_ORDER = "importance"')
        ranks_bench.report(self.result)


WARC_VARIANTS = {
    "WARC off": {},
    "WARC_ENABLED": {"WARC_ENABLED": "True", "WARC_DIR": "{workdir}/warc"},
    "WARC_ENABLED, WARC_REVISITS off": {"WARC_ENABLED": "True", "WARC_DIR": "{workdir}/warc",
                                        "WARC_REVISITS": "False"},
}  # fmt: skip


def reparse_once(redis_url: str, work: Path) -> Sample:
    """``scrapy reparse shop`` on what a crawl archived in ``work``: pages and
    seconds as the command reports them (its engine's time), CPU of the process."""
    command = [sys.executable, "-m", "scrapy", "reparse", "shop", "-s", f"WARC_DIR={work}/warc",
               "-s", f"REDIS_URL={redis_url}", "-s", f"ITEMS_DIR={work}/reparsed",
               "-s", "LOG_LEVEL=WARNING"]  # fmt: skip
    log = work / "reparse.log"
    with log.open("w") as stderr:
        proc = subprocess.Popen(command, cwd=ROOT, stderr=stderr)
        _, status, usage = os.wait4(proc.pid, 0)  # its own CPU time
    err = log.read_text()
    found = re.search(r"reparsed (\d+) responses .* in ([\d.]+) s", err)
    if os.waitstatus_to_exitcode(status) != 0 or found is None:
        raise SystemExit(f"scrapy reparse failed:\n{err[-3000:]}")
    return Sample(int(found[1]), float(found[2]), usage.ru_utime + usage.ru_stime, 0)


@section(27, "WARC capture: CPU per page and pages/s with it on and off, bytes, reparse")
class Warc(Section):
    def __init__(self) -> None:
        self.figures = {name: Figures() for name in [*WARC_VARIANTS, "scrapy reparse"]}
        self.bytes_per_page: dict[str, list[float]] = {name: [] for name in WARC_VARIANTS}
        self.real: dict | None = None

    def measure(self, bench: Bench, run: int) -> None:
        for number, (name, settings) in enumerate(WARC_VARIANTS.items()):
            work = bench.work / f"warc-{run}-{number}"  # each variant's files its own
            sample = crawl_once(bench.redis_url, settings, 1, work)
            self.figures[name].samples.append(sample)
            if settings:
                size = sum(path.stat().st_size for path in (work / "warc").glob("*.warc.gz"))
                self.bytes_per_page[name].append(size / max(sample.pages, 1))
            if name == "WARC_ENABLED":
                self.figures["scrapy reparse"].samples.append(reparse_once(bench.redis_url, work))
        if run == 0:  # real pages, once: larger, and what the shop's are not
            self.real = warc_bench.measure(bench.redis_url, bench.work / "warc-real")

    def report(self, bench: Bench) -> None:
        print(f"\n27. WARC capture, one node, the shop crawl, median of {RUNS}")
        print(f"   {'variant':40s} {'pages/s':>8s} {'CPU ms/page':>12s} {'bytes/page':>11s}")
        for name, figures in self.figures.items():
            sizes = sorted(self.bytes_per_page.get(name) or [0])
            size = f"{sizes[len(sizes) // 2]:11,.0f}" if sizes[-1] else f"{'':11s}"
            print(f"   {name:40s} {figures.rate:8.0f} {figures.cpu_ms_per_page:12.2f} {size}")
        on, off = self.figures["WARC_ENABLED"], self.figures["WARC off"]
        again = self.figures["scrapy reparse"]
        if off.rate and off.cpu_ms_per_page:
            print(f"   with WARC / without: {on.rate / off.rate:.2f}x pages/s, "
                  f"{on.cpu_ms_per_page / off.cpu_ms_per_page:.2f}x CPU per page")  # fmt: skip
        if on.rate and on.cpu_ms_per_page:
            print(f"   reparse / the crawl that archived it: {again.rate / on.rate:.2f}x pages/s, "
                  f"{again.cpu_ms_per_page / on.cpu_ms_per_page:.2f}x CPU per page")  # fmt: skip
        print("   bytes: request, response and metadata records, gzip each; one node on the "
              "shop meets no duplicate payload, so revisits save nothing here")  # fmt: skip
        warc_bench.report(self.real)
