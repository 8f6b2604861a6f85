"""``make bench`` section 32: an address shared by forty hosts, used to its rate.

Forty names resolved to one loopback address by a DNS server on loopback, the
demo shop behind it (its home page and the pages of its first two categories, about 20
  pages a name),
crawled by two nodes with ``CLUSTER_IP_RATE``: the requests the server saw per
second while its hosts had work (every page but the last second's), as a
fraction of the rate; the busiest 2 seconds against the limit; pages crawled;
seconds from the first request to the last against what the rate allows. Once
with one frontier (the address's line, ``lease.lua``) and once sharded
(``FRONTIER_SHARDS=4``: the slots claimed apart, ``claim_levels.lua``).

    .venv/bin/python -m tools.address_bench [--rate 5] [--names 40] [--categories 6]
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
import urllib.request
from pathlib import Path

from servers import services
from servers.clients import redis_at

ADDRESS = "127.0.0.2"
NAMES = 40
RATE = 5.0
CATEGORIES = 2  # about 20 pages a name: 800 or so at the address
NODES = 2
LOG_LEVEL = "WARNING"
VARIANTS = {"one frontier (the address's line)": "1", "FRONTIER_SHARDS=4 (claimed apart)": "4"}


def _times(site: services.Service) -> list[float]:
    with urllib.request.urlopen(site.url + "/__host_times", timeout=30) as response:
        return sorted(t for seen in json.load(response).values() for t, _ in seen)


def busiest(times: list[float], window: float = 2.0) -> int:
    """The most requests in any ``window`` seconds starting at a request."""
    most, start = 0, 0
    for end, t in enumerate(times):
        while t - times[start] >= window:
            start += 1
        most = max(most, end - start + 1)
    return most


def crawl(redis_url: str, work: Path, rate: float, names: int, categories: int,
          shards: str) -> dict:  # fmt: skip
    client = redis_at(redis_url)
    client.flushall()
    work.mkdir(parents=True, exist_ok=True)
    zone, log = work / "zone.json", work / "queries.log"
    log.write_text("")
    hosts = [f"site{n}.test" for n in range(names)]
    zone.write_text(json.dumps({host: {"a": [ADDRESS], "ttl": 300} for host in hosts}))
    dns = services.start_dns_server(zone, log)
    site = services.start_demo_site(host=ADDRESS, categories=categories)
    shutil.rmtree(work / "items", ignore_errors=True)
    try:
        port = site.url.rsplit(":", 1)[1]
        client.lpush("site:start_urls", *[f"http://{h}:{port}/" for h in hosts])
        settings = {"MAX_IDLE_TIME_BEFORE_CLOSE": "3", "LOG_LEVEL": LOG_LEVEL,
                    "ITEMS_DIR": str(work / "items"), "DNS_SERVERS": dns.url,
                    "CLUSTER_IP_RATE": str(rate), "FRONTIER_SHARDS": shards,
                    "CONTENT_DUPLICATES": "off"}  # fmt: skip
        args = {"allow": "/category/"}
        procs, logs = [], []
        for n in range(NODES):
            logs.append(work / f"node-{n}.log")
            logs[-1].unlink(missing_ok=True)
            procs.append(services.start_node("site", redis_url, log=logs[-1], settings=settings,
                                             spider_args=args))  # fmt: skip
        began = time.monotonic()
        for proc, node_log in zip(procs, logs, strict=True):
            services.wait_node(proc, node_log)
        wall = time.monotonic() - began
        times = _times(site)
    finally:
        site.stop()
        dns.stop()
        client.close()
    span = times[-1] - times[0]
    # while its hosts had work: the whole crawl but its last second (a last
    # straggler would make the tail, which is what "used" must show, look short)
    used = (len(times) - 1) / span / rate if span else 0.0
    # the steady part (the middle 90 % of requests) and the tail (the last 5 %)
    low, high = times[len(times) // 20], times[-len(times) // 20]
    steady = (len(times) * 0.9) / (high - low) / rate if high > low else 0.0
    return {"requests": len(times), "span": span, "used": used, "busiest": busiest(times),
            "allowed_span": (len(times) - 1) / rate, "wall": wall, "steady": steady,
            "tail": times[-1] - high}  # fmt: skip


def measure(redis_url: str, work: Path, rate: float = RATE, names: int = NAMES,
            categories: int = CATEGORIES) -> dict:  # fmt: skip
    rows = {name: crawl(redis_url, work, rate, names, categories, shards)
            for name, shards in VARIANTS.items()}  # fmt: skip
    return {"rate": rate, "names": names, "rows": rows}


def report(result: dict) -> None:
    rate = result["rate"]
    print(f"  {result['names']} names on one address, CLUSTER_IP_RATE={rate:g}, two nodes, "
          "requests as the server saw them:")  # fmt: skip
    print(f"  {'frontier':36s} {'requests':>9s} {'seconds':>8s} {'the rate allows':>16s} "
          f"{'used':>6s} {'steady':>7s} {'last 5 %':>9s} {'busiest 2 s':>12s} "
          f"{'limit':>6s}")  # fmt: skip
    for name, row in result["rows"].items():
        print(f"  {name:36s} {row['requests']:9d} {row['span']:8.1f} {row['allowed_span']:16.1f} "
              f"{row['used']:6.2f} {row['steady']:7.2f} {row['tail']:8.1f}s {row['busiest']:12d} "
              f"{2 * rate * 1.1 + 1:6.0f}")  # fmt: skip
    print("  (used: requests a second from the first to the last over the rate, target 0.9 "
          "or more; steady: the same over the middle 90 % of requests; last 5 %: the seconds "
          "the last 5 % of requests took; the busiest 2 s never over the limit)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=RATE)
    parser.add_argument("--names", type=int, default=NAMES)
    parser.add_argument("--categories", type=int, default=CATEGORIES)
    parser.add_argument("--only", choices=sorted(VARIANTS.values()))
    args = parser.parse_args()
    if args.only:
        for name, shards in list(VARIANTS.items()):
            if shards != args.only:
                del VARIANTS[name]
    with tempfile.TemporaryDirectory() as work:
        server = services.start_redis(Path(work))
        try:
            report(measure(server.url, Path(work) / "run", args.rate, args.names, args.categories))
        finally:
            server.stop()


if __name__ == "__main__":
    main()
