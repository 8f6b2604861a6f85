"""``make bench`` section 21: a frontier bigger than Redis (``FRONTIER_OVERFLOW``).

N requests over 10,000 hosts are queued through the real enqueue script, once with
the whole frontier in Redis and once with each host keeping ``HEAD`` requests in
Redis and the rest going to MongoDB through the real spill path (``Overflow.turn``,
as a node runs it). Measured at each size: Redis ``used_memory`` per queued
request, the MongoDB documents' bytes per request (BSON, before the server's
compression, and the server's own figure where it gives one), and microseconds
per request to enqueue (the last batch), to lease and release (LEASES leases of
16, with the refills they call for), and to spill.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from typing import Any

import bson
import redis

from extensions.frontier.frontier import Frontier
from extensions.frontier.overflow.spilling import Overflow
from extensions.frontier.overflow.store import MongoOverflow
from extensions.frontier.overflow.turn import OverflowLimits
from extensions.keys import SpiderKeys
from servers.clients import redis_at
from tools.crawls_bench import lease_and_release

SIZES = tuple(int(n) for n in os.environ.get("BENCH_OVERFLOW_SIZES", "1000000,10000000").split(","))
HOSTS = 10_000
HEAD = 20  # FRONTIER_HOST_QUEUE_MAX here: 200,000 requests in Redis at most
FILL_BATCH = 5000
LEASES = 500  # of 16 requests each (crawls_bench.BATCH)


class _Stats:
    def inc_value(self, key: str, count: int = 1) -> None:
        pass

    def max_value(self, key: str, value: int) -> None:
        pass


def _entries(start: int, count: int) -> list[tuple[bytes, str, int, bytes]]:
    out = []
    for i in range(start, start + count):
        host = f"h{i % HOSTS}.example"
        url = f"http://{host}/section/{i // HOSTS}/page-{i}.html"
        data = json.dumps({"url": url, "meta": {"depth": 2}}).encode()
        out.append((b"", host, 0, data))  # no fingerprint: the dupefilter is section 12's
    return out


def _idle() -> None:
    pass


def _spill_all(overflow: Overflow, client: redis.Redis, keys: SpiderKeys) -> float:
    """Run turns until nothing waits in NAME:spill: seconds taken."""
    began = time.perf_counter()
    while client.llen(keys.named("spill")) or client.exists(
        keys.named("spilling", node=overflow.node_id)
    ):
        overflow.turn()
    return time.perf_counter() - began


def _empty(client: redis.Redis) -> None:
    """FLUSHALL without blocking Redis for the seconds 10M keys take, then wait
    until their memory is freed (it is the baseline of the next measure)."""
    client.flushall(asynchronous=True)
    for _ in range(600):
        if not int(client.info("memory").get("lazyfree_pending_objects", 0)):
            return
        time.sleep(0.5)


def measure_one(redis_url: str, mongo_uri: str | None, size: int) -> dict[str, Any]:
    client = redis_at(redis_url)
    _empty(client)
    base = client.info("memory")["used_memory"]
    keys = SpiderKeys.for_spider("bench")
    frontier = Frontier(client, keys, "b1")
    client.zadd(keys.nodes, {"b1": 10**13})
    overflow = None
    database = f"bench_{uuid.uuid4().hex[:8]}"
    if mongo_uri:
        store = MongoOverflow(mongo_uri, database, "bench_frontier")
        overflow = Overflow(
            client, frontier.shards, "b1", store,
            OverflowLimits(queue_max=HEAD, batch=10_000, interval=1.0, backlog_max=10**9,
                           node_timeout=60),
            stats=_Stats(), dead_letter=lambda **r: None,
            resumed=lambda: None,
        )  # fmt: skip
        client.hset(keys.frontier, "host_queue_max", HEAD)
    spill_seconds = 0.0
    for start in range(0, size - FILL_BATCH, FILL_BATCH):
        frontier.enqueue(_entries(start, FILL_BATCH))
        if overflow is not None and client.llen(keys.named("spill")) >= 50_000:
            spill_seconds += _spill_all(overflow, client, keys)
    began = time.perf_counter()
    frontier.enqueue(_entries(size - FILL_BATCH, FILL_BATCH))
    enqueue_us = 1e6 * (time.perf_counter() - began) / FILL_BATCH
    if overflow is not None:
        spill_seconds += _spill_all(overflow, client, keys)
    memory = client.info("memory")["used_memory"] - base
    row: dict[str, Any] = {
        "size": size, "overflow": overflow is not None, "redis_bytes": memory / size,
        "redis_mb": memory / 1e6,
        "enqueue_us": enqueue_us,
    }  # fmt: skip
    if overflow is not None:
        collection = overflow.store.collection
        sample = list(collection.find().limit(1000))
        row["bson_bytes"] = sum(len(bson.encode(doc)) for doc in sample) / max(len(sample), 1)
        row["in_mongo"] = in_mongo = int(client.hget(keys.frontier, "spilled") or 0)
        row["spill_us"] = 1e6 * spill_seconds / max(in_mongo, 1)
        try:
            stats = collection.database.command("collStats", collection.name)
            row["mongo_bytes"] = (stats["size"] + stats.get("totalIndexSize", 0)) / in_mongo
        except Exception:  # a server that keeps no such figures
            row["mongo_bytes"] = None
    # with the overflow, a node's turn after each: the refills those leases call for
    leased, seconds = lease_and_release(frontier, LEASES, overflow.turn if overflow else _idle)
    row["lease_us"] = 1e6 * seconds / max(leased, 1)
    row["leased"] = leased
    if overflow is not None:
        overflow.store.client.drop_database(database)
        overflow.store.close()
    _empty(client)
    client.close()
    return row


def measure(redis_url: str, mongo_uri: str) -> list[dict[str, Any]]:
    rows = []
    for size in SIZES:
        rows.append(measure_one(redis_url, None, size))
        rows.append(measure_one(redis_url, mongo_uri, size))
    return rows


def report(rows: list[dict[str, Any]]) -> None:
    print(f"   {HOSTS:,} hosts; with FRONTIER_OVERFLOW each keeps {HEAD} in Redis (at most "
          f"{HOSTS * HEAD:,} requests), the rest in MongoDB")  # fmt: skip
    print(f"   {'queued':>11s} {'frontier':>9s} {'Redis MB':>9s} {'Redis B/req':>12s} "
          f"{'Mongo BSON B/req':>17s} {'enqueue us/req':>15s} {'lease+release us/req':>21s} "
          f"{'spill us/req':>13s}")  # fmt: skip
    for row in rows:
        where = "overflow" if row["overflow"] else "Redis"
        bson_bytes = f"{row['bson_bytes']:17.0f}" if row["overflow"] else f"{'-':>17s}"
        spill = f"{row['spill_us']:13.1f}" if row["overflow"] else f"{'-':>13s}"
        print(f"   {row['size']:11,d} {where:>9s} {row['redis_mb']:9.0f} "
              f"{row['redis_bytes']:12.1f} {bson_bytes} {row['enqueue_us']:15.1f} "
              f"{row['lease_us']:21.1f} {spill}")  # fmt: skip
    for row in rows:
        if row["overflow"] and row.get("mongo_bytes"):
            print(f"   {row['size']:,d} queued, {row['in_mongo']:,d} of them in MongoDB: the "
                  f"server's own figure, documents and indexes, {row['mongo_bytes']:.0f} B "
                  "per request there")  # fmt: skip
