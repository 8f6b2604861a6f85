"""``make bench`` section 18's second part: what a paused crawl holding many
queued requests costs the leases of another crawl, driven without Scrapy.

The paused crawl is filled with N requests over 1,000 hosts; then another crawl
is leased from and released, LEASES calls of 16. Per lease: Redis commands (from
``INFO commandstats``, the scripts' inner calls included) and microseconds.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable

import redis

from extensions.crawlid import crawl_fingerprint
from extensions.frontier.crawls.state import Crawls
from extensions.frontier.frontier import Frontier
from extensions.keys import SpiderKeys
from servers.clients import redis_at

SIZES = (0, 10_000, 100_000, 1_000_000)
LEASES = 2000
BATCH = 16
FILL_BATCH = 5000


def _entries(crawl: str, start: int, count: int, hosts: int = 1000) -> list:
    out = []
    for i in range(start, start + count):
        url = f"http://h{i % hosts}.example/{crawl}/{i}"
        fingerprint = crawl_fingerprint(hashlib.sha1(url.encode()).digest(), crawl)
        data = json.dumps({"url": url, "meta": {"crawl_id": crawl}}).encode()
        out.append((fingerprint, f"h{i % hosts}.example#{crawl}", 0, data))
    return out


def lease_and_release(
    frontier: Frontier, times: int, between: Callable[[], object] = lambda: None
) -> tuple[int, float]:
    """Lease BATCH requests and release them at once, ``times`` times, calling
    ``between`` after each: (requests leased, seconds taken)."""
    began = time.perf_counter()
    leased = 0
    for _ in range(times):
        leases, _ = frontier.lease(BATCH, lease_timeout=600)
        frontier.release([lease.member for lease in leases])
        leased += len(leases)
        between()
    return leased, time.perf_counter() - began


def command_calls(client: redis.Redis) -> int:
    return sum(int(v["calls"]) for v in client.info("commandstats").values())


def measure_one(redis_url: str, paused_size: int) -> dict[str, float]:
    client = redis_at(redis_url)
    client.flushall()
    keys = SpiderKeys.for_spider("bench")
    frontier = Frontier(client, keys, "b1")
    crawls = Crawls(client, keys)
    crawls.register("held")
    crawls.register("live")
    crawls.pause("held")
    for start in range(0, paused_size, FILL_BATCH):
        frontier.enqueue(_entries("held", start, min(FILL_BATCH, paused_size - start)))
    frontier.enqueue(_entries("live", 0, LEASES * BATCH))
    client.config_resetstat()
    before = command_calls(client)
    leased, seconds = lease_and_release(frontier, LEASES)
    calls = command_calls(client) - before
    memory = client.info("memory")["used_memory"]
    client.close()
    return {
        "paused": paused_size,
        "leased": leased,
        "commands_per_lease": calls / LEASES,
        "us_per_lease": 1e6 * seconds / LEASES,
        "memory_mb": memory / 1e6,
    }


def measure(redis_url: str) -> list[dict[str, float]]:
    return [measure_one(redis_url, size) for size in SIZES]


def report(rows: list[dict[str, float]]) -> None:
    print(f"   a paused crawl's size against another crawl's leases ({LEASES} leases of "
          f"{BATCH}, each released; without Scrapy)")  # fmt: skip
    print(f"   {'queued in the paused crawl':>28s} {'commands/lease':>15s} {'us/lease':>9s} "
          f"{'leased':>7s} {'Redis MB':>9s}")  # fmt: skip
    for row in rows:
        paused, leased = int(row["paused"]), int(row["leased"])
        print(f"   {paused:28,d} {row['commands_per_lease']:15.1f} "
              f"{row['us_per_lease']:9.0f} {leased:7,d} {row['memory_mb']:9.0f}")  # fmt: skip
