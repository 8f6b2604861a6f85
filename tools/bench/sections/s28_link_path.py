"""``make bench`` section 28: the link path on real HTML: CPU ms per page against plain
Scrapy, pages/s."""

from __future__ import annotations

import shutil
import statistics
from pathlib import Path

from servers.nginx import PYTHON_DOCS, start_nginx
from tools.bench.base import Bench, Section
from tools.bench_crawl import RUNS
from tools.links_bench import (
    FOLLOW,
    HOSTS,
    PLAIN,
    SITE,
    TUNED,
    UNLIMITED,
    UNPORTED,
    _crawl,
    links_per_page,
)


class LinkPath(Section):
    number = 28
    title = "the link path on real HTML: CPU ms per page against plain Scrapy, pages/s"

    def __init__(self) -> None:
        names = (PLAIN, TUNED, SITE, FOLLOW, UNPORTED)
        self.samples: dict[str, list[dict]] = {name: [] for name in names}
        self.skipped = not PYTHON_DOCS.is_dir() or not (
            shutil.which("nginx") or Path("/usr/sbin/nginx").exists()
        )

    def measure(self, bench: Bench, run: int) -> None:
        if self.skipped:
            return
        dirs = [bench.work / f"links-nginx-{run}-{n}" for n in range(len(HOSTS))]
        hosts = [start_nginx(workdir, PYTHON_DOCS, rate=UNLIMITED, burst=UNLIMITED, host=host)
                 for workdir, host in zip(dirs, HOSTS, strict=True)]  # fmt: skip
        try:
            starts = [nginx.url + "/index.html" for nginx in hosts]
            logs = [workdir / "access.log" for workdir in dirs]
            for number, name in enumerate(self.samples):
                work = bench.work / f"links-{run}-{number}"
                self.samples[name].append(_crawl(name, bench.redis_url, starts, work, logs))
        finally:
            for nginx in hosts:
                nginx.stop()

    def report(self, bench: Bench) -> None:
        print(f"\n28. The link path on real HTML: python3-doc on 3 hosts, one process, "
              f"median of {RUNS}")  # fmt: skip
        if self.skipped:
            print("   skipped: python3-doc or nginx missing (make system-tools)")
            return
        links = links_per_page()
        print(f"   {'variant':44s} {'pages':>6s} {'pages/s':>8s} {'CPU ms/page':>12s} "
              f"{'x plain':>8s} {'us/link':>8s}")  # fmt: skip
        plain_cpu = 0.0
        for name, samples in self.samples.items():
            cpu = statistics.median(1000 * s["cpu"] / max(s["pages"], 1) for s in samples)
            rate = statistics.median(s["rate"] for s in samples)
            plain_cpu = plain_cpu or cpu
            print(f"   {name:44s} {samples[0]['pages']:6d} {rate:8.0f} {cpu:12.2f} "
                  f"{cpu / plain_cpu:7.2f}x {1000 * cpu / links:8.1f}")  # fmt: skip
        first = self.samples[PLAIN][0]["stored"]
        differing = [
            f"{name} run {run + 1}: {len(first - s['stored'])} missing, "
            f"{len(s['stored'] - first)} more (e.g. {sorted(first ^ s['stored'])[:2]})"
            for name, samples in self.samples.items()
            for run, s in enumerate(samples)
            if s["stored"] != first
        ]
        print(f"   {links:.0f} links a page (Scrapy's extractor); the same pages stored by "
              f"each: {'NO' if differing else 'yes'}")  # fmt: skip
        for line in differing:  # against plain Scrapy's first run
            print(f"   {line}")
