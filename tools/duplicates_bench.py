"""``make bench`` section 29: what content duplicates (``CONTENT_DUPLICATES``, "mark"
by default) cost a page. One node crawls the demo shop, and the ``site`` spider
Python's documentation (Debian's python3-doc) served by nginx on one loopback
address, each with the check on ("mark", near duplicates marked too, as by default)
and off, run alternately; CPU is the node's own. The docs part is skipped without
python3-doc or nginx (``make system-tools`` installs them)."""

from __future__ import annotations

import json
import shutil
import statistics
from pathlib import Path

from servers import services
from servers.clients import redis_at
from servers.nginx import PYTHON_DOCS, start_nginx
from tools.bench_base import Bench, Section, section
from tools.bench_crawl import RUNS, crawl_once

HOST = "127.0.0.84"
ALLOW = r"^http://127\.0\.0\.84:\d+/"  # the one copy, no link out
UNLIMITED = 100_000
MODES = ("mark", "off")


def _docs_crawl(mode: str, redis_url: str, start: str, work: Path) -> dict:
    client = redis_at(redis_url)
    client.flushall()
    client.lpush("site:start_urls", start)
    client.close()
    settings = {"MAX_IDLE_TIME_BEFORE_CLOSE": "2", "LOG_LEVEL": "WARNING",
                "ITEMS_DIR": str(work / "items"), "CONTENT_DUPLICATES": mode}  # fmt: skip
    node = services.start_node("site", redis_url, log=work / "node.log", settings=settings,
                               spider_args={"allow": ALLOW})  # fmt: skip
    cpu = services.wait_node(node, work / "node.log")
    lines = [json.loads(line) for path in (work / "items").rglob("*.jsonl")
             for line in path.read_text().splitlines()]  # fmt: skip
    marked = sum(1 for item in lines if item.get("duplicate_of") or item.get("near_duplicate_of"))
    return {"pages": len(lines), "cpu": cpu, "marked": marked}


@section(29, "content duplicates on and off: CPU a page on the demo shop and Python's docs")
class ContentDuplicates(Section):
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
