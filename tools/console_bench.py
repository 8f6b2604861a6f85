"""``make bench`` section 20: what the web console costs Redis and how long its
pages take, on crawls of growing size.

A crawl of ``shop`` is filled through the frontier's real enqueue script with N
queued requests over H hosts (and N/10 dead letters); then ``scrapy console``
serves each page several times, and each page is timed (median) and its Redis
commands counted (``INFO commandstats``, the scripts' inner calls included).
For contrast: ``scrapy status --hosts``'s view of every host, which scans them all.
"""

from __future__ import annotations

import hashlib
import json
import statistics
import time
import urllib.request
from pathlib import Path

import redis

from extensions.frontier.frontier import Frontier
from extensions.keys import SpiderKeys
from extensions.observability.status import host_status
from servers import services
from servers.clients import redis_at

SIZES = ((100, 1_000), (10_000, 100_000), (100_000, 1_000_000))  # (hosts, queued)
PAGES = ("/", "/nodes", "/shop", "/shop/hosts", "/shop/dlq", "/shop/dlq?reason=503",
         "/api/shop/status")  # fmt: skip
REPEATS = 5
FILL_BATCH = 5000


def _commands(client: redis.Redis) -> int:
    return sum(int(v["calls"]) for v in client.info("commandstats").values())


def _fill(client: redis.Redis, hosts: int, queued: int) -> None:
    keys = SpiderKeys.for_spider("shop")
    frontier = Frontier(client, keys, "bench")
    for start in range(0, queued, FILL_BATCH):
        entries = []
        for i in range(start, min(start + FILL_BATCH, queued)):
            url = f"http://h{i % hosts}.example/p/{i}"
            data = json.dumps({"url": url}).encode()
            entries.append((hashlib.sha1(url.encode()).digest(), f"h{i % hosts}.example", 0, data))
        frontier.enqueue(entries)
    letters = [json.dumps({"kind": "retries_exhausted", "url": f"http://h{n % hosts}.example/x/{n}",
                           "error": "503 Service Unavailable" if n % 4 else "timeout",
                           "node": "bench", "time": time.time()})
               for n in range(queued // 10)]  # fmt: skip
    for start in range(0, len(letters), FILL_BATCH):
        client.rpush(keys.dlq, *letters[start : start + FILL_BATCH])


def _get(url: str) -> None:
    with urllib.request.urlopen(url, timeout=120) as response:
        response.read()


def measure_one(redis_url: str, work: Path, hosts: int, queued: int) -> dict[str, object]:
    client = redis_at(redis_url)
    client.flushall()
    began = time.perf_counter()
    _fill(client, hosts, queued)
    filled = time.perf_counter() - began
    console = services.start_console(redis_url, log=work / f"console-{queued}.log")
    pages: dict[str, tuple[float, float]] = {}
    try:
        for page in PAGES:
            _get(console.url + page)  # templates and scripts loaded
            seconds, calls = [], []
            for _ in range(REPEATS):
                before = _commands(client)
                start = time.perf_counter()
                _get(console.url + page)
                seconds.append(time.perf_counter() - start)
                calls.append(_commands(client) - before - 1)  # less the INFO itself
            pages[page] = (statistics.median(calls), statistics.median(seconds) * 1000)
    finally:
        console.stop()
    before = _commands(client)
    start = time.perf_counter()
    rows = host_status(client, SpiderKeys.for_spider("shop"), 0, 20)
    naive = (_commands(client) - before - 1, (time.perf_counter() - start) * 1000, len(rows))
    memory = client.info("memory")["used_memory"]
    client.flushall()
    client.close()
    return {"hosts": hosts, "queued": queued, "fill_s": filled, "pages": pages,
            "naive": naive, "memory_mb": memory / 1e6}  # fmt: skip


def measure(redis_url: str, work: Path, sizes=SIZES) -> list[dict[str, object]]:
    work.mkdir(parents=True, exist_ok=True)
    return [measure_one(redis_url, work, hosts, queued) for hosts, queued in sizes]


def report(rows: list[dict]) -> None:
    if not rows:
        return
    sizes = [f"{r['queued']:,} / {r['hosts']:,}" for r in rows]
    heads = "".join(f" {size:>25s}" for size in sizes)
    print(
        "   Redis commands and milliseconds per page (median of "
        f"{REPEATS}), by queued requests / hosts (and a tenth as many dead letters)"
    )
    print(f"   {'page':24s}{heads}")
    for page in PAGES:
        cells = "".join(
            f" {r['pages'][page][0]:12.0f} cmd {r['pages'][page][1]:8.1f} ms" for r in rows
        )
        print(f"   {page:24s}{cells}")
    cells = "".join(f" {r['naive'][0]:12.0f} cmd {r['naive'][1]:8.1f} ms" for r in rows)
    print(f"   {'status --hosts (scan)':24s}{cells}")
    print("   Redis used_memory: " + ", ".join(f"{r['memory_mb']:.0f} MB" for r in rows))
