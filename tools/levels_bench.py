"""``make bench`` section 23: politeness per registered domain and per server
address (CLUSTER_DOMAIN_RATE, CLUSTER_IP_RATE), driven without Scrapy.

Lease cost: a frontier of HOSTS hosts (one queued request each) over
HOSTS / 10 addresses and HOSTS / 10 registered domains (hosts found one after
another share them, the worst case: most of a lease's hosts wait in a line),
leased LEASES times 16 at
a time (each lease released), with per-host limits alone and with the address
and domain levels on: Redis commands per lease (``INFO commandstats``, the
scripts' inner calls included) and microseconds per lease. The sharded row
(FRONTIER_SHARDS = 8 on one Redis) claims each lease's slots at the levels
apart (``hosts/claims.py``) and gives back those whose slot is further off:
its cost is the lease, the claim and the give-back together. Memory: Redis bytes
a host's description adds to its host hash, a DNS record (``NAME:dns:HOST``),
and an address's pacing hash and line (``MEMORY USAGE``).

    .venv/bin/python -m tools.levels_bench [--hosts 1000000]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

import redis

from extensions.dns.records import Answer
from extensions.frontier.frontier import LEASE_LEAD_MS, Frontier, now_ms
from extensions.frontier.hosts.claims import LevelClaims
from extensions.frontier.results import Entry
from extensions.keys import SpiderKeys
from servers import services
from servers.clients import redis_at
from tools.crawls_bench import BATCH, LEASES, command_calls, lease_and_release

SIZES = (100_000, 1_000_000)
FILL_BATCH = 10_000
HOSTS_PER_LEVEL = 10  # hosts per address and per registered domain
SHARDED = 8
#: name -> (rates, FRONTIER_SHARDS)
VARIANTS: dict[str, tuple[dict[str, float], int]] = {
    "per-host limits alone (CLUSTER_HOST_RATE=1)": ({"*": 1}, 1),
    "+ CLUSTER_IP_RATE=10": ({"*": 1, "*ip": 10}, 1),
    "+ CLUSTER_DOMAIN_RATE=5 and CLUSTER_IP_RATE=10": ({"*": 1, "*ip": 10, "*domain": 5}, 1),
    f"FRONTIER_SHARDS={SHARDED}, per-host limits alone": ({"*": 1}, SHARDED),
    f"FRONTIER_SHARDS={SHARDED}, + both levels (claimed apart)": (
        {"*": 1, "*ip": 10, "*domain": 5},
        SHARDED,
    ),
}


def address(n: int) -> str:
    return f"10.{(n >> 16) & 255}.{(n >> 8) & 255}.{n & 255}"


def fill(client: redis.Redis, frontier: Frontier, keys: SpiderKeys, hosts: int) -> None:
    """One queued request per host, every host described (domain, address)."""
    expires = now_ms() + 3_600_000
    for start in range(0, hosts, FILL_BATCH):
        entries: list[Entry] = []
        pipe = client.pipeline(transaction=False)
        for i in range(start, min(start + FILL_BATCH, hosts)):
            # neighbours share an address and a domain: a lease's candidates
            # crowd a few levels, and most of them go to a line
            level = i // HOSTS_PER_LEVEL
            host = f"h{i}.d{level}.example"
            url = f"http://{host}/page"
            data = json.dumps({"url": url}).encode()
            entries.append((hashlib.sha1(url.encode()).digest(), host, 0, data))
            described = {"dom": f"d{level}.example", "ip": address(level), "ipx": expires}
            shard = keys.shard(keys.shard_of(host))
            pipe.hset(shard.host(host), mapping=described)  # type: ignore[arg-type]
        frontier.enqueue(entries)
        pipe.execute()


def lease_cost(
    client: redis.Redis, hosts: int, rates: Mapping[str, float], shards: int = 1
) -> dict[str, float]:
    client.flushall()
    keys = SpiderKeys.for_spider("bench", shards=shards)
    frontier = Frontier(client, keys, "b1")
    fill(client, frontier, keys, hosts)
    for scope in {keys.rates, *(shard.rates for shard in keys.all_shards())}:
        client.hset(scope, mapping=rates)  # type: ignore[arg-type]
    client.config_resetstat()
    before = command_calls(client)
    if shards > 1:
        leased, seconds = claim_and_release(client, frontier, keys)
    else:
        leased, seconds = lease_and_release(frontier, LEASES)
    calls = command_calls(client) - before
    return {"commands": calls / LEASES, "us": 1e6 * seconds / LEASES, "leased": leased,
            "per_request": calls / max(leased, 1), "lines": client.zcard(keys.lines)}  # fmt: skip


def claim_and_release(
    client: redis.Redis, frontier: Frontier, keys: SpiderKeys
) -> tuple[int, float]:
    """lease_and_release with the levels claimed apart: (requests sent, seconds)."""
    claims = LevelClaims(client, keys, "b1", frontier.send_tolerance, LEASE_LEAD_MS)
    began = time.perf_counter()
    sent = 0
    for _ in range(LEASES):
        leases, _ = frontier.lease(BATCH, lease_timeout=600)
        admitted, _ = claims.claim_leases(leases)
        frontier.release([lease.member for lease in admitted])
        sent += len(admitted)
    return sent, time.perf_counter() - began


def memory(client: redis.Redis) -> dict[str, int]:
    """Bytes Redis keeps for one host's description, its DNS record, and one
    address's pacing state with a line of HOSTS_PER_LEVEL hosts."""
    client.flushall()
    keys = SpiderKeys.for_spider("bench")
    bare, described = keys.host("www.example.com"), keys.host("www2.example.com")
    for key in (bare, described):
        client.hset(key, mapping={"next": now_ms(), "leased": 12, "accepted": 12})
    client.hset(described, mapping={"dom": "example.com", "ip": "203.0.113.7",
                                    "ipx": now_ms() + 3_600_000})  # fmt: skip
    client.set(keys.dns("www2.example.com"), Answer(("203.0.113.7",)).dumps(), ex=3600)
    level = keys.address("203.0.113.7")
    client.hset(level, mapping={"next": now_ms(), "turn": "www2.example.com"})
    for n in range(HOSTS_PER_LEVEL):
        client.zadd(level + ":line", {f"host{n}.example.com": now_ms()})
    pace = keys.pace("www2.example.com")  # a sharded frontier's (claim_levels.lua)
    client.hset(pace, mapping={"next": now_ms(), "res": now_ms() + 1000})
    measured = (bare, described, keys.dns("www2.example.com"), level, level + ":line", pace)
    usage = {key: int(client.memory_usage(key) or 0) for key in measured}
    return {
        "description": usage[described] - usage[bare],
        "dns": usage[keys.dns("www2.example.com")],
        "level": usage[level],
        "line": usage[level + ":line"],
        "pace": usage[pace],
    }


def measure(redis_url: str, sizes: tuple[int, ...] = SIZES) -> dict:
    client = redis_at(redis_url)
    rows = [
        {"hosts": hosts, "variant": name, **lease_cost(client, hosts, rates, shards)}
        for hosts in sizes
        for name, (rates, shards) in VARIANTS.items()
    ]
    result = {"rows": rows, "memory": memory(client)}
    client.flushall()
    client.close()
    return result


def report(result: dict) -> None:
    print(f"   lease cost, {LEASES} leases of {BATCH} (each released), one request queued per "
          f"host, {HOSTS_PER_LEVEL} hosts per address and per domain; without Scrapy")  # fmt: skip
    print(f"   {'hosts':>10s}  {'limits':52s} {'commands/lease':>15s} {'us/lease':>9s} "
          f"{'leased':>7s} {'commands/request':>17s} {'lines':>7s}")  # fmt: skip
    for row in result["rows"]:
        print(f"   {row['hosts']:10,d}  {row['variant']:52s} {row['commands']:15.1f} "
              f"{row['us']:9.0f} {row['leased']:7,d} {row['per_request']:17.1f} "
              f"{row['lines']:7,d}")  # fmt: skip
    m = result["memory"]
    print(
        "   (leased: requests the leases gave to be sent; lines: domains and addresses whose "
        "hosts wait in a line at the end; sharded, the hosts wait for the slot reserved)"
    )
    print(f"   Redis bytes: a host's description (dom, ip, ipx) {m['description']}, its DNS "
          f"record {m['dns']}; an address's pacing hash {m['level']} (gone a minute after "
          f"its last slot), its line of {HOSTS_PER_LEVEL} hosts {m['line']}; sharded, a "
          f"host's pace with a slot reserved {m['pace']}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, nargs="*", default=list(SIZES))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        server = services.start_redis(Path(work))
        try:
            report(measure(server.url, tuple(args.hosts)))
        finally:
            server.stop()


if __name__ == "__main__":
    main()
