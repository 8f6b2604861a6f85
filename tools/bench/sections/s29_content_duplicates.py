"""``make bench`` section 29: content duplicates on and off: CPU a page on the demo
shop and Python's docs."""

from __future__ import annotations

import shutil
import statistics
from pathlib import Path

from servers.nginx import PYTHON_DOCS, start_nginx
from tools.bench.base import Bench, Section
from tools.bench_crawl import RUNS, crawl_once
from tools.duplicates_bench import HOST, MODES, UNLIMITED, _docs_crawl


class ContentDuplicates(Section):
    number = 29
    title = "content duplicates on and off: CPU a page on the demo shop and Python's docs"

    def __init__(self) -> None:
        self.shop: dict[str, list] = {mode: [] for mode in MODES}
        self.docs: dict[str, list[dict]] = {mode: [] for mode in MODES}
        self.docs_skipped = not PYTHON_DOCS.is_dir() or not (
            shutil.which("nginx") or Path("/usr/sbin/nginx").exists()
        )

    def measure(self, bench: Bench, run: int) -> None:
        for mode in MODES:
            work = bench.work / f"dups-shop-{run}-{mode}"
            work.mkdir(parents=True, exist_ok=True)
            sample = crawl_once(bench.redis_url, {"CONTENT_DUPLICATES": mode}, 1, work)
            self.shop[mode].append(sample)
        if self.docs_skipped:
            return
        nginx = start_nginx(bench.work / f"dups-nginx-{run}", PYTHON_DOCS, rate=UNLIMITED,
                            burst=UNLIMITED, host=HOST)  # fmt: skip
        try:
            for mode in MODES:
                work = bench.work / f"dups-docs-{run}-{mode}"
                sample = _docs_crawl(mode, bench.redis_url, nginx.url + "/index.html", work)
                self.docs[mode].append(sample)
        finally:
            nginx.stop()

    def report(self, bench: Bench) -> None:
        print(
            f"\n29. Content duplicates (CONTENT_DUPLICATES) on and off, one node, median of {RUNS}"
        )
        print(f"   {'site':28s} {'mode':5s} {'pages':>6s} {'marked':>7s} {'CPU ms/page':>12s} "
              f"{'x off':>7s}")  # fmt: skip
        off = statistics.median(1000 * s.cpu / max(s.pages, 1) for s in self.shop["off"])
        for mode in MODES:
            samples = self.shop[mode]
            cpu = statistics.median(1000 * s.cpu / max(s.pages, 1) for s in samples)
            print(f"   {'demo shop':28s} {mode:5s} {samples[0].pages:6d} {'':>7s} {cpu:12.2f} "
                  f"{cpu / off:6.2f}x")  # fmt: skip
        if self.docs_skipped:
            print("   Python's docs: skipped, python3-doc or nginx missing (make system-tools)")
            return
        off = statistics.median(1000 * s["cpu"] / max(s["pages"], 1) for s in self.docs["off"])
        for mode in MODES:
            samples = self.docs[mode]
            cpu = statistics.median(1000 * s["cpu"] / max(s["pages"], 1) for s in samples)
            print(f"   {'Python docs (site spider)':28s} {mode:5s} {samples[0]['pages']:6d} "
                  f"{samples[0]['marked']:7d} {cpu:12.2f} {cpu / off:6.2f}x")  # fmt: skip
