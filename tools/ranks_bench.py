"""``make bench`` section 26: what to fetch first (FRONTIER_ORDER = "importance").

Coverage: the ``web`` spider on a generated web (``demosite/linkweb.py``: 2,000
sites of 10 pages, linked to by a Zipf law), one node from ten middling sites
until it fetched a tenth of the pages, in discovery order and by importance:
the share of the pages of the top 1 % and 5 % of sites (by the domains that
link to them) it fetched. Redis: bytes of a host's link sketch (a HyperLogLog
of the domains that link to it) and rank, and commands a link adds. Lease cost:
a frontier of HOSTS hosts (one queued request each, ranked by a power law),
leased LEASES times 16 (each released), in discovery order and by importance.

    .venv/bin/python -m tools.ranks_bench [--hosts 100000 1000000]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
import time
import urllib.request
from pathlib import Path

import redis

from demosite.linkweb import in_links
from extensions.frontier.frontier import Frontier
from extensions.frontier.ranks.state import HostRanks
from extensions.frontier.results import Entry
from extensions.keys import SpiderKeys
from servers import services
from servers.clients import redis_at
from tools.crawls_bench import BATCH, LEASES, command_calls, lease_and_release

SIZES = (100_000, 1_000_000)
FILL_BATCH = 10_000
WEB_HOSTS, WEB_PAGES = 2000, 10
BUDGET = WEB_HOSTS * WEB_PAGES // 10  # pages a crawl fetches (CLOSESPIDER_PAGECOUNT)
SKETCH_SIZES = (1, 10, 100, 1000, 10_000)
ORDERS = ("discovery", "importance")


def fill(client: redis.Redis, keys: SpiderKeys, hosts: int, order: str) -> Frontier:
    """One queued request per host; host i ranked 1,000,000 / (i + 1)."""
    client.hset(keys.frontier, "order", order)
    ranks = HostRanks(client, keys)
    frontier = Frontier(client, keys, "b1")
    for start in range(0, hosts, FILL_BATCH):
        numbers = range(start, min(start + FILL_BATCH, hosts))
        ranks.set_ranks({f"h{i}.example": 1_000_000 / (i + 1) for i in numbers})
        entries: list[Entry] = []
        for i in numbers:
            url = f"http://h{i}.example/page"
            data = json.dumps({"url": url}).encode()
            entries.append((hashlib.sha1(url.encode()).digest(), f"h{i}.example", 0, data))
        frontier.enqueue(entries)
    return frontier


def lease_cost(client: redis.Redis, hosts: int, order: str) -> dict[str, float]:
    client.flushall()
    frontier = fill(client, SpiderKeys.for_spider("bench"), hosts, order)
    client.config_resetstat()
    before = command_calls(client)
    leased, seconds = lease_and_release(frontier, LEASES)
    calls = command_calls(client) - before
    return {"commands": calls / LEASES, "us": 1e6 * seconds / LEASES, "leased": leased}


def sketch(client: redis.Redis) -> dict[str, object]:
    """Bytes of a host's sketch at several counts of linking domains, of its
    rank, and Redis commands per link added (new links, 500 a write)."""
    client.flushall()
    keys = SpiderKeys.for_spider("bench")
    ranks = HostRanks(client, keys)
    sizes = {}
    for count in SKETCH_SIZES:
        host = f"linked{count}.example"
        for start in range(0, count, 500):
            ranks.add_links(
                [(host, host, f"d{n}.example") for n in range(start, min(start + 500, count))]
            )
        sizes[count] = ranks.graph_bytes(host)
    client.flushall()
    for start in range(0, 100_000, 10_000):
        ranks.set_ranks({f"h{i}.example": i for i in range(start, start + 10_000)})
    rank_bytes = int(client.memory_usage(keys.named("hostrank")) or 0) / 100_000
    client.config_resetstat()
    before = command_calls(client)
    links = [(f"h{i % 5000}.example", f"h{i % 5000}.example", f"src{i}.example")
             for i in range(5000)]  # fmt: skip
    for start in range(0, len(links), 500):
        ranks.add_links(links[start : start + 500])
    per_link = (command_calls(client) - before) / len(links)
    return {"bytes": sizes, "rank_bytes": rank_bytes, "per_link": per_link}


def coverage(redis_url: str, work: Path) -> dict[str, dict[str, float]]:
    """The share of the top sites' pages each order fetched with a tenth of the pages."""
    client = redis_at(redis_url)
    work.mkdir(parents=True, exist_ok=True)
    web = services.start_link_web(WEB_HOSTS, WEB_PAGES)
    zone, log = work / "zone.json", work / "queries.log"
    zone.write_text(json.dumps({f"h{n}.test": {"a": ["127.0.0.1"], "ttl": 3600}
                                for n in range(WEB_HOSTS)}))  # fmt: skip
    dns = services.start_dns_server(zone, log)
    fetched: dict[str, dict[str, int]] = {}
    try:
        for order in ORDERS:
            before = _hits(web.url)
            client.flushall()
            port = web.url.rsplit(":", 1)[1]
            client.lpush("web:start_urls", *(f"http://h{n}.test:{port}/" for n in range(500, 510)))
            settings = {"FRONTIER_ORDER": order, "CLOSESPIDER_PAGECOUNT": BUDGET,
                        "DNS_SHARED": True, "DNS_SERVERS": dns.url,
                        "MAX_IDLE_TIME_BEFORE_CLOSE": 3,
                        "ITEMS_DIR": str(work / order)}  # fmt: skip
            node = services.start_node(
                "web", redis_url, log=work / f"{order}.log", settings=settings
            )
            node.wait(300)
            fetched[order] = {h: n - before.get(h, 0) for h, n in _hits(web.url).items()}
    finally:
        dns.stop()
        web.stop()
        client.close()
    linked = in_links(WEB_HOSTS, WEB_PAGES)
    by_rank = sorted(range(WEB_HOSTS), key=lambda n: -linked[n])
    result: dict[str, dict[str, float]] = {}
    for label, top in (("1 %", by_rank[: WEB_HOSTS // 100]), ("5 %", by_rank[: WEB_HOSTS // 20])):
        result[label] = {
            order: sum(pages.get(f"h{n}.test", 0) for n in top) / (len(top) * WEB_PAGES)
            for order, pages in fetched.items()
        }
    return result


def _hits(url: str) -> dict[str, int]:
    with urllib.request.urlopen(url + "/__hits", timeout=10) as answer:
        return {host: sum(paths.values()) for host, paths in json.load(answer).items()}


def measure(redis_url: str, work: Path, sizes: tuple[int, ...] = SIZES) -> dict:
    client = redis_at(redis_url)
    began = time.perf_counter()
    rows = [{"hosts": hosts, "order": order, **lease_cost(client, hosts, order)}
            for hosts in sizes for order in ORDERS]  # fmt: skip
    result = {"rows": rows, "sketch": sketch(client), "coverage": coverage(redis_url, work),
              "seconds": time.perf_counter() - began}  # fmt: skip
    client.flushall()
    client.close()
    return result


def report(result: dict) -> None:
    print(f"   coverage: the web spider on {WEB_HOSTS:,d} generated sites of {WEB_PAGES} pages "
          "(in-links by a Zipf law), stopped at a tenth of the pages")  # fmt: skip
    for label, shares in result["coverage"].items():
        print(f"   pages of the top {label} of sites fetched: discovery order "
              f"{shares['discovery']:.0%}, by importance {shares['importance']:.0%}")  # fmt: skip
    s = result["sketch"]
    sizes = ", ".join(f"{count:,d}: {size:,d}" for count, size in s["bytes"].items())
    print(f"   Redis bytes of a host's link sketch, by domains linking to it: {sizes}; "
          f"its rank {s['rank_bytes']:.0f}; commands per link sent "
          f"{s['per_link']:.2f}")  # fmt: skip
    print(f"   lease cost, {LEASES} leases of {BATCH} (each released), one request queued per "
          "host, ranks by a power law; without Scrapy")  # fmt: skip
    print(
        f"   {'hosts':>10s}  {'order':12s} {'commands/lease':>15s} {'us/lease':>9s} {'leased':>7s}"
    )
    for row in result["rows"]:
        print(f"   {row['hosts']:10,d}  {row['order']:12s} {row['commands']:15.1f} "
              f"{row['us']:9.0f} {row['leased']:7,d}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, nargs="*", default=list(SIZES))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        server = services.start_redis(Path(work))
        try:
            report(measure(server.url, Path(work), tuple(args.hosts)))
        finally:
            server.stop()


if __name__ == "__main__":
    main()
