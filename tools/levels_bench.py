"""``make bench`` section 23: politeness per registered domain and per server
address (CLUSTER_DOMAIN_RATE, CLUSTER_IP_RATE), driven without Scrapy.

Lease cost: a frontier of HOSTS hosts (one queued request each) over
HOSTS / 10 addresses and HOSTS / 10 registered domains (hosts found one after
another share them, the worst case: most of a lease's hosts wait in a line),
leased LEASES times 16 at
a time (each lease released), with per-host limits alone and with the address
and domain levels on: Redis commands per lease (``INFO commandstats``, the
scripts' inner calls included) and microseconds per lease. Memory: Redis bytes
a host's description adds to its host hash, a DNS record (``NAME:dns:HOST``),
and an address's pacing hash and line (``MEMORY USAGE``).

    .venv/bin/python -m tools.levels_bench [--hosts 1000000]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
from collections.abc import Mapping
from pathlib import Path

import redis

from extensions.dns.records import Answer
from extensions.frontier.frontier import Frontier, now_ms
from extensions.frontier.results import Entry
from extensions.keys import SpiderKeys
from tools import services
from tools.crawls_bench import BATCH, LEASES, command_calls, lease_and_release

SIZES = (100_000, 1_000_000)
FILL_BATCH = 10_000
HOSTS_PER_LEVEL = 10  # hosts per address and per registered domain
VARIANTS: dict[str, dict[str, float]] = {
    "per-host limits alone (CLUSTER_HOST_RATE=1)": {"*": 1},
    "+ CLUSTER_IP_RATE=10": {"*": 1, "*ip": 10},
    "+ CLUSTER_DOMAIN_RATE=5 and CLUSTER_IP_RATE=10": {"*": 1, "*ip": 10, "*domain": 5},
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
            pipe.hset(keys.host(host), mapping=described)  # type: ignore[arg-type]
        frontier.enqueue(entries)
        pipe.execute()


def lease_cost(client: redis.Redis, hosts: int, rates: Mapping[str, float]) -> dict[str, float]:
    client.flushall()
    keys = SpiderKeys.for_spider("bench")
    frontier = Frontier(client, keys, "b1")
    fill(client, frontier, keys, hosts)
    client.hset(keys.rates, mapping=rates)  # type: ignore[arg-type]
    client.config_resetstat()
    before = command_calls(client)
    leased, seconds = lease_and_release(frontier, LEASES)
    calls = command_calls(client) - before
    return {"commands": calls / LEASES, "us": 1e6 * seconds / LEASES, "leased": leased,
            "per_request": calls / max(leased, 1), "lines": client.zcard(keys.lines)}  # fmt: skip


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
    usage = {key: int(client.memory_usage(key) or 0) for key in
             (bare, described, keys.dns("www2.example.com"), level, level + ":line")}  # fmt: skip
    return {
        "description": usage[described] - usage[bare],
        "dns": usage[keys.dns("www2.example.com")],
        "level": usage[level],
        "line": usage[level + ":line"],
    }


def measure(redis_url: str, sizes: tuple[int, ...] = SIZES) -> dict:
    client = redis.Redis.from_url(redis_url)
    rows = [
        {"hosts": hosts, "variant": name, **lease_cost(client, hosts, rates)}
        for hosts in sizes
        for name, rates in VARIANTS.items()
    ]
    result = {"rows": rows, "memory": memory(client)}
    client.flushall()
    client.close()
    return result


def report(result: dict) -> None:
    print(f"   lease cost, {LEASES} leases of {BATCH} (each released), one request queued per "
          f"host, {HOSTS_PER_LEVEL} hosts per address and per domain; without Scrapy")  # fmt: skip
    print(f"   {'hosts':>10s}  {'limits':47s} {'commands/lease':>15s} {'us/lease':>9s} "
          f"{'leased':>7s} {'commands/request':>17s} {'lines':>7s}")  # fmt: skip
    for row in result["rows"]:
        print(f"   {row['hosts']:10,d}  {row['variant']:47s} {row['commands']:15.1f} "
              f"{row['us']:9.0f} {row['leased']:7,d} {row['per_request']:17.1f} "
              f"{row['lines']:7,d}")  # fmt: skip
    m = result["memory"]
    print(
        "   (leased: requests the leases gave; lines: domains and addresses whose hosts "
        "wait in a line at the end)"
    )
    print(f"   Redis bytes: a host's description (dom, ip, ipx) {m['description']}, its DNS "
          f"record {m['dns']}; an address's pacing hash {m['level']} (gone a minute after "
          f"its last slot), its line of {HOSTS_PER_LEVEL} hosts {m['line']}")  # fmt: skip


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
