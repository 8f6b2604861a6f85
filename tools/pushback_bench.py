"""``make bench`` section 17: hosts that push back, with the host backoff on and off.

Six hosts of the demo shop on loopback addresses, each crawled for its books
(149 pages) by two nodes of the ``site`` spider with ``CLUSTER_HOST_RATE=8``:
three that behave, one that can serve 3 requests a second (503 above), one
that answers 429 with ``Retry-After: 5`` above 5 a second, one that serves a
captcha page for 30 s to a client above 5 a second. "Off" is the same crawl
with ``PushbackMiddleware`` taken out of ``DOWNLOADER_MIDDLEWARES`` (what the
stack did before: retries per request, the rate fixed by the user).
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from servers import services
from servers.clients import redis_at

RATE = 8  # CLUSTER_HOST_RATE, requests/s per host for the cluster
HOSTS = {
    "127.0.0.20": "",
    "127.0.0.21": "",
    "127.0.0.22": "",
    "127.0.0.23": "overload:3",
    "127.0.0.24": "throttle:5:5",
    "127.0.0.25": "ban:5:30",
}
SETTINGS = {
    "CLUSTER_HOST_RATE": str(RATE),
    "MAX_IDLE_TIME_BEFORE_CLOSE": "3",
    "CLOSESPIDER_TIMEOUT": "240",
    "LOG_LEVEL": "INFO",
}
OFF = {
    "DOWNLOADER_MIDDLEWARES": json.dumps(
        {"extensions.downloadermiddlewares.pushback.PushbackMiddleware": None}
    )
}
VARIANTS = {"backoff on (the default)": {}, "backoff off": OFF}
PAGES = 149  # the books category: 8 listing pages and 141 products


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.load(answer)


def crawl(redis_url: str, settings: dict[str, str], workdir: Path) -> dict:
    client = redis_at(redis_url)
    client.flushall()
    sites = {
        host: services.start_demo_site(host=host, pushback=mode) for host, mode in HOSTS.items()
    }
    try:
        client.lpush("site:start_urls", *(site.url + "/category/books" for site in sites.values()))
        items = workdir / "items"
        procs = [
            services.start_node(
                "site",
                redis_url,
                log=workdir / f"node-{n}.log",
                settings={**SETTINGS, **settings, "ITEMS_DIR": str(items)},
                spider_args={"allow": "/category/books,/product/"},
            )
            for n in range(2)
        ]
        started = time.time()
        for proc in procs:
            proc.wait(600)
        seconds = time.time() - started
        stored: Counter[str] = Counter()
        for path in items.rglob("*.jsonl"):
            for line in path.read_text().splitlines():
                item = json.loads(line)
                if item["title"] == "Attention required":
                    stored["ban pages stored"] += 1
                else:
                    stored[urlsplit(item["url"]).hostname or ""] += 1
        hosts = {}
        for host, site in sites.items():
            times = sorted(
                t
                for path, ts in _get(site.url + "/__times").items()
                if path != "/robots.txt"
                for t in ts
            )
            report = _get(site.url + "/__pushback") if HOSTS[host] else {}
            served = report.get("served", {})
            refused = served.get("503", 0) + served.get("429", 0)
            hosts[host] = {
                "mode": HOSTS[host] or "behaves",
                "requests": len(times),
                "refused": refused,
                "inside_window": report.get("inside_window", 0),
                "captcha": served.get("captcha", 0),
                "stored": stored[host],
                "rate": (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 else 0.0,
            }
        return {
            "seconds": seconds,
            "pages": sum(h["stored"] for h in hosts.values()),
            "hosts": hosts,
            "ban_pages_stored": stored["ban pages stored"],
            "dead_letters": client.llen("site:dlq"),
        }
    finally:
        for site in sites.values():
            site.stop()
        client.close()


def measure(
    redis_url: str, workdir: Path, crawl: Callable[[str, dict[str, str], Path], dict] = crawl
) -> dict[str, dict]:
    """``crawl`` once with the host backoff on and once off, each in a folder of its own."""
    results = {}
    for n, (name, settings) in enumerate(VARIANTS.items()):
        path = workdir / f"variant-{n}"
        path.mkdir(parents=True, exist_ok=True)
        results[name] = crawl(redis_url, settings, path)
    return results


def report(results: dict[str, dict]) -> None:
    print(
        f"\n17. Hosts that push back: six hosts of {PAGES} pages, two nodes, "
        f"CLUSTER_HOST_RATE={RATE} (one crawl each)"
    )
    for name, result in results.items():
        print(
            f"   {name}: {result['pages']} pages stored in {result['seconds']:.0f} s "
            f"({result['pages'] / result['seconds']:.1f} pages/s), "
            f"{result['dead_letters']} dead-lettered, {result['ban_pages_stored']} ban pages stored"
        )
        print(
            f"     {'host':12s} {'behaviour':14s} {'requests':>8s} {'refused':>8s} "
            f"{'in window':>9s} {'captchas':>8s} {'stored':>6s} {'req/s':>6s}"
        )
        for host, row in result["hosts"].items():
            share = f"{row['refused']} ({row['refused'] / max(row['requests'], 1):.0%})"
            print(
                f"     {host:12s} {row['mode']:14s} {row['requests']:8d} {share:>8s} "
                f"{row['inside_window']:9d} {row['captcha']:8d} {row['stored']:6d} "
                f"{row['rate']:6.2f}"
            )
    for name, result in results.items():
        behaved = [row["rate"] for row in result["hosts"].values() if row["mode"] == "behaves"]
        mean = sum(behaved) / len(behaved)
        print(
            f"   well-behaved hosts, {name}: {mean:.2f} requests/s against {RATE} configured "
            f"({mean / RATE:.2f}x)"
        )


if __name__ == "__main__":  # one section alone: python -m tools.pushback_bench
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        server = services.start_redis(Path(tmp) / "redis")
        try:
            report(measure(server.url, Path(tmp)))
        finally:
            server.stop()
    os._exit(0)
