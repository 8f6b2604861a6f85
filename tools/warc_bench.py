"""``make bench`` section 27, on real pages: WARC capture's cost and bytes per page
on python3-doc's library pages (Debian's, served by nginx, no limit), one node of
the ``site`` spider, WARC off and on. Skipped when python3-doc or nginx is missing
(``make system-tools`` installs them)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from servers import services
from servers.clients import redis_at
from servers.nginx import PYTHON_DOCS, start_nginx
from servers.services import ROOT
from tools.bench_crawl import Sample

ALLOW = r"/library/[\w.]+\.html$"
UNLIMITED = 100_000  # nginx's limit_req, requests/s: none in effect


def _crawl(redis_url: str, settings: dict[str, str], workdir: Path, start: str) -> dict:
    client = redis_at(redis_url)
    client.flushall()
    client.lpush("site:start_urls", start)
    client.close()
    proc = services.start_node(
        "site", redis_url, log=workdir / "node.log",
        settings={"MAX_IDLE_TIME_BEFORE_CLOSE": "2", "LOG_LEVEL": "WARNING",
                  "ITEMS_DIR": str(workdir / "items"), **settings},
        spider_args={"allow": ALLOW},
    )  # fmt: skip
    cpu = services.wait_node(proc, workdir / "node.log")
    pages = sum(len(path.read_text().splitlines()) for path in workdir.rglob("*.jsonl"))
    warc = sum(path.stat().st_size for path in workdir.glob("warc/*.warc.gz"))
    return {"pages": pages, "cpu": cpu, "warc_bytes": warc}


def measure(redis_url: str, workdir: Path) -> dict[str, dict] | None:
    if not PYTHON_DOCS.is_dir() or not (shutil.which("nginx") or Path("/usr/sbin/nginx").exists()):
        return None
    nginx = start_nginx(workdir / "nginx", PYTHON_DOCS, rate=UNLIMITED, burst=UNLIMITED)
    try:
        start = nginx.url + "/library/index.html"
        return {
            "WARC off": _crawl(redis_url, {}, workdir / "off", start),
            "WARC_ENABLED": _crawl(redis_url, {"WARC_ENABLED": "True",
                                               "WARC_DIR": str(workdir / "on" / "warc")},
                                   workdir / "on", start),
        }  # fmt: skip
    finally:
        nginx.stop()


def report(result: dict[str, dict] | None) -> None:
    if result is None:
        print("   real pages: skipped (python3-doc or nginx missing: make system-tools)")
        return
    print("   real pages: python3-doc's library, one node of the site spider, one crawl each")
    for name, row in result.items():
        per_page = f"{row['warc_bytes'] / max(row['pages'], 1):11,.0f}" if row["warc_bytes"] else ""
        # no pages/s: a crawl this short is mostly the node's start and idle close
        print(f"   {name:40s} {'':8s} {1000 * row['cpu'] / max(row['pages'], 1):12.2f} "
              f"{per_page:>11s}   ({row['pages']} pages)")  # fmt: skip
    on, off = result["WARC_ENABLED"], result["WARC off"]
    cpu_on, cpu_off = on["cpu"] / max(on["pages"], 1), off["cpu"] / max(off["pages"], 1)
    print(f"   with WARC / without, real pages: {cpu_on / cpu_off:.2f}x CPU per page")


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
