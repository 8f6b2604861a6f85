"""``make bench``: side-by-side figures measured in one run on this machine.

Every variant crawls the bundled demo shop on loopback with the same spider
logic and concurrency; variants are run alternately and each figure is the
median of ``BENCH_RUNS`` runs (default 3). Speed is measured on the site's side:
pages served divided by the time from the first to the last request, so
start-up and close-down are left out. CPU is the node process's own user+sys
time per page; Redis commands per page come from ``INFO commandstats``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import redis

from tools import services

RUNS = int(os.environ.get("BENCH_RUNS", "3"))
CONCURRENCY = 32
NO_ADDON = '{"extensions.addon.DistributedAddon": null}'
STORE = '{"extensions.pipelines.ItemStorePipeline": 900}'

VARIANTS: dict[str, dict[str, str]] = {
    "plain Scrapy (memory queue)": {"ADDONS": NO_ADDON, "ITEM_PIPELINES": STORE},
    "stock scrapy-redis scheduler": {
        "ADDONS": NO_ADDON,
        "ITEM_PIPELINES": STORE,
        "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
        "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
    },
    "this project (leases, delayed retries, checkpoints)": {},
}


@dataclass
class Sample:
    pages: int
    seconds: float
    cpu: float
    redis_calls: int

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


def redis_calls(client: redis.Redis) -> int:
    stats = client.info("commandstats")
    return sum(v["calls"] for k, v in stats.items() if not k.endswith(("info", "config")))


def crawl_once(redis_url: str, settings: dict[str, str], nodes: int, workdir: Path) -> Sample:
    client = redis.Redis.from_url(redis_url)
    client.flushall()
    client.config_resetstat()
    site = services.start_demo_site()
    try:
        args = ["-s", f"REDIS_URL={redis_url}", "-s", f"CONCURRENT_REQUESTS={CONCURRENCY}",
                "-s", f"CONCURRENT_REQUESTS_PER_DOMAIN={CONCURRENCY}",
                "-s", "MAX_IDLE_TIME_BEFORE_CLOSE=1", "-s", f"ITEMS_DIR={workdir}",
                "-s", "LOG_LEVEL=WARNING", "-s", "SPIDER_MODULES=tools.bench_spiders",
                "-a", f"start={site.url}/"]  # fmt: skip
        for name, value in settings.items():
            args += ["-s", f"{name}={value}"]
        logs = [workdir / f"node-{n}.log" for n in range(nodes)]
        procs = []
        for log in logs:
            log.parent.mkdir(parents=True, exist_ok=True)
            with log.open("wb") as stderr:
                procs.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "scrapy", "crawl", "bench_shop", *args],
                        cwd=services.ROOT,
                        stdout=subprocess.DEVNULL,
                        stderr=stderr,
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
        return Sample(len(stamps), stamps[-1] - stamps[0], cpu, redis_calls(client))
    finally:
        site.stop()
        client.close()


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        work = Path(tmp)
        server = services.start_redis(work / "redis")
        try:
            results = {name: Figures() for name in VARIANTS}
            scale = {n: Figures() for n in (1, 2)}
            for run in range(RUNS):
                for name, settings in VARIANTS.items():
                    results[name].samples.append(
                        crawl_once(server.url, settings, 1, work / f"items-{run}")
                    )
                for n in scale:
                    scale[n].samples.append(crawl_once(server.url, {}, n, work / f"scale-{run}"))
                print(f"run {run + 1}/{RUNS} done", file=sys.stderr)
        finally:
            server.stop()
    report(results, scale)


def report(results: dict[str, Figures], scale: dict[int, Figures]) -> None:
    pages = int(next(iter(results.values())).median("pages"))
    print(f"\n1. One node, {pages} pages of the demo shop, CONCURRENT_REQUESTS={CONCURRENCY}, "
          f"median of {RUNS} alternating runs, {os.cpu_count()} cores")  # fmt: skip
    print(f"   {'variant':52s} {'pages/s':>8s} {'ratio':>7s} {'CPU ms/page':>12s} "
          f"{'Redis cmds/page':>16s}")  # fmt: skip
    plain = results["plain Scrapy (memory queue)"].rate
    for name, figures in results.items():
        calls = f"{figures.calls_per_page:16.2f}" if figures.calls_per_page else f"{'-':>16s}"
        print(f"   {name:52s} {figures.rate:8.0f} {figures.rate / plain:6.2f}x "
              f"{figures.cpu_ms_per_page:12.2f} {calls}")  # fmt: skip
    ours = results["this project (leases, delayed retries, checkpoints)"].rate
    stock = results["stock scrapy-redis scheduler"].rate
    print(f"   this project vs stock scrapy-redis: {ours / stock:.2f}x; "
          f"vs plain Scrapy: {ours / plain:.2f}x")  # fmt: skip
    print(f"\n2. Nodes on one Redis (this project), same site, median of {RUNS}")
    one = scale[1].rate
    for n, figures in scale.items():
        print(f"   {n} node{'s' if n > 1 else ' '}  {figures.rate:8.0f} pages/s  "
              f"{figures.rate / one:5.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
