"""How many pages per second one Redis can serve the frontier, with no Scrapy
and no HTTP: client processes drive the frontier's own scripts as nodes do
(lease a batch; write its pages' links at a realistic share of repeats, less
those the client sent before, as a node's local cache drops them, and release
the leases, in one transaction) for a few seconds, and Redis's own CPU
time says how far from a full core it was.

    .venv/bin/python -m tools.redis_ceiling [--clients 1,2,4] [--seconds 10]

``make bench`` runs it as section 13.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import random
import tempfile
import time
from pathlib import Path

import redis

from servers import services
from servers.clients import redis_at

LINKS_PER_PAGE = 20  # links a page yields
NEW_SHARE = 0.25  # of those, not seen before (the demo shop's figure after the local cache)
HOSTS = 50
LEASE_BATCH = 16


def request_json(host: int, n: int) -> bytes:
    """A request as this crawler stores one (about 200 bytes)."""
    return json.dumps(
        {
            "url": f"http://host{host}.example/product/{n}",
            "callback": "parse_product",
            "headers": {"Referer": [f"http://host{host}.example/category/books?page=2"]},
            "meta": {"depth": 3},
        },
        separators=(",", ":"),
    ).encode()


def page_links(pages: int, hosts: int, rng: random.Random, sent, counter: int) -> tuple[list, int]:
    """The links ``pages`` pages yield, NEW_SHARE of them new (numbered from
    ``counter`` on), less those ``sent`` (a node's local cache) already holds:
    frontier entries, and the counter after them."""
    entries = []
    for _ in range(pages * LINKS_PER_PAGE):
        host = rng.randrange(hosts)
        if rng.random() < NEW_SHARE:
            counter += 1
            n = counter
        else:
            n = rng.randrange(1000)  # one of the few everyone links to: seen
        data = request_json(host, n)
        fingerprint = hashlib.sha1(data).digest()
        if sent.add(fingerprint):
            entries.append((fingerprint, f"host{host}.example", 0, data))
    return entries, counter


def _frontier(url: str, name: str, shards: int, cluster: bool):
    from extensions import connection
    from extensions.frontier.frontier import Frontier
    from extensions.keys import SpiderKeys

    server = connection.connect(url, cluster=cluster)
    keys = SpiderKeys.for_spider("ceiling", hash_tag=cluster, shards=shards)
    return server, Frontier(server, keys, name)


def drive(
    url: str,
    client_id: int,
    seconds: float,
    out: multiprocessing.Queue,
    shards: int = 1,
    cluster: bool = False,
    hosts: int = HOSTS,
) -> None:
    from extensions import defaults
    from extensions.frontier.redisops import execute
    from extensions.frontier.sent import SentFingerprints

    server, frontier = _frontier(url, f"client{client_id}", shards, cluster)
    sent = SentFingerprints(defaults.DUPEFILTER_LOCAL_CACHE)  # as a node drops repeats
    rng = random.Random(client_id)
    counter = client_id * 10**9
    pages = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        leased, _ = frontier.lease(LEASE_BATCH, 600)
        if not leased:
            time.sleep(0.001)
            continue
        entries, counter = page_links(len(leased), hosts, rng, sent, counter)
        # as the scheduler flushes: one transaction on one slot; across shards,
        # the writes first and the releases once they are in
        pipe = server.pipeline(transaction=shards == 1)
        frontier.enqueue_on(pipe, entries)
        if shards > 1:
            execute(pipe)
            pipe = server.pipeline(transaction=False)
        frontier.release([lease.member for lease in leased], pipe)
        pipe.hincrby(frontier.keys.checkpoint, "done", len(leased))
        execute(pipe)
        pages += len(leased)
    out.put(pages)


def measure(
    url: str,
    clients: int,
    seconds: float,
    *,
    shards: int = 1,
    cluster: bool = False,
    hosts: int = HOSTS,
) -> dict:
    """Pages/s ``clients`` processes get through, and each primary's CPU."""
    server, seed = _frontier(url, "seed", shards, cluster)
    primaries = _primaries(server)
    for client in primaries:
        client.flushall()
    seeds = [(h, 10**8 + n) for h in range(hosts) for n in range(200 * HOSTS // hosts)]
    seed.enqueue([("", f"host{h}.example", 0, request_json(h, n)) for h, n in seeds])
    for client in primaries:
        client.config_resetstat()
    cpu_before = [_redis_cpu(client) for client in primaries]
    out: multiprocessing.Queue = multiprocessing.Queue()
    procs = [
        multiprocessing.Process(target=drive, args=(url, n, seconds, out, shards, cluster, hosts))
        for n in range(clients)
    ]
    began = time.monotonic()
    for proc in procs:
        proc.start()
    pages = sum(out.get(timeout=seconds + 60) for _ in procs)
    for proc in procs:
        proc.join(30)
    took = time.monotonic() - began
    per_primary = [
        (_redis_cpu(client) - before) / took
        for client, before in zip(primaries, cpu_before, strict=True)
    ]
    busy = sum(per_primary)
    stats: dict[str, dict] = {}
    for client in primaries:
        for name, values in client.info("commandstats").items():
            counted = stats.setdefault(name, {"usec": 0, "calls": 0})
            counted["usec"] += values["usec"]
            counted["calls"] += values["calls"]
        client.close()
    scripts = sum(stats.get(f"cmdstat_{name}", {}).get("calls", 0) for name in SCRIPT_CALLS)
    inside = sum(v["calls"] for k, v in stats.items() if k not in TRANSPORT_STATS)
    total_usec = sum(v["usec"] for v in stats.values()) or 1
    top = sorted(stats.items(), key=lambda kv: -kv[1]["usec"])[:4]
    server.close()
    return {
        "clients": clients,
        "shards": shards,
        "pages_per_s": pages / took,
        "redis_core": busy,
        "per_primary": per_primary,
        "ceiling": pages / took / busy if busy else 0.0,
        # what Redis runs per page (a script's own commands included), and the
        # calls the clients make for it (script calls, the transaction's others)
        "commands_per_page": inside / pages if pages else 0.0,
        "scripts_per_page": scripts / pages if pages else 0.0,
        "time_share": {k.removeprefix("cmdstat_"): v["usec"] / total_usec for k, v in top},
    }


SCRIPT_CALLS = ("eval", "evalsha")
# what carries commands rather than being one (the ceiling counts scripts' insides)
TRANSPORT_STATS = {f"cmdstat_{name}" for name in (*SCRIPT_CALLS, "multi", "exec")}


def aof_bytes_per_page(url: str, seconds: float = 3.0) -> float:
    """What the append-only file grows by per page, one client driving the
    frontier for ``seconds`` with AOF switched on for the while, then set back
    (the replicas' stream is the same commands). It leases what ``measure`` queued:
    call it after."""
    server = redis_at(url)
    was = server.config_get("appendonly").get("appendonly", "no")
    try:
        server.config_set("appendonly", "yes")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # the first rewrite writes what is there
            persistence = server.info("persistence")
            if persistence["aof_enabled"] and not persistence["aof_rewrite_in_progress"]:
                break
            time.sleep(0.05)
        before = int(server.info("persistence")["aof_current_size"])
        out: multiprocessing.Queue = multiprocessing.Queue()
        drive(url, 99, seconds, out)
        pages = out.get(timeout=60)
        grown = int(server.info("persistence")["aof_current_size"]) - before
        return grown / pages if pages else 0.0
    finally:
        server.config_set("appendonly", was)  # as it was: a server kept in AOF stays so
        server.close()


def _primaries(server) -> list[redis.Redis]:
    """A plain client per primary (the server itself when it is not a cluster)."""
    from redis.cluster import RedisCluster

    if not isinstance(server, RedisCluster):
        return [redis.Redis(connection_pool=server.connection_pool)]
    return [redis.Redis(host=node.host, port=node.port) for node in server.get_primaries()]


def _redis_cpu(server: redis.Redis) -> float:
    info = server.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def report(rows: list[dict], aof_per_page: float | None = None) -> None:
    print(f"\n13. The Redis ceiling: client processes driving the frontier's scripts, no Scrapy, "
          f"{LINKS_PER_PAGE} links a page ({NEW_SHARE:.0%} new), {HOSTS} hosts, "
          f"{multiprocessing.cpu_count()} cores shared by Redis and the clients")  # fmt: skip
    print("   (Redis's time by command: EXEC and EVAL include the commands they run)")
    for row in rows:
        share = ", ".join(f"{name} {part:.0%}" for name, part in row["time_share"].items())
        print(f"   {row['clients']} clients: {row['pages_per_s']:8.0f} pages/s, Redis "
              f"{row['redis_core']:.0%} of a core -> {row['ceiling']:8.0f} pages/s at a full "
              f"core; its time: {share}")  # fmt: skip
    row = rows[0]
    print(f"   per page: {row['commands_per_page']:.0f} Redis commands (those scripts run "
          f"included) from {row['scripts_per_page']:.2f} script calls", end="")  # fmt: skip
    print(f"; AOF {aof_per_page:.0f} bytes" if aof_per_page is not None else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", default="1,2,3")
    parser.add_argument("--seconds", type=float, default=8.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ceiling-") as tmp:
        server = services.start_redis(Path(tmp) / "redis")
        try:
            rows = [measure(server.url, int(n), args.seconds) for n in args.clients.split(",")]
            aof = aof_bytes_per_page(server.url)
        finally:
            server.stop()
    report(rows, aof)


if __name__ == "__main__":
    main()
