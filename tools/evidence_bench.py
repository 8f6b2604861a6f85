"""``make bench`` section 22: host pushback decided on evidence, by kind of host.

One crawl of four hosts at once by two nodes of the ``site`` spider on the
project's defaults (no configured rate), with the host backoff on, and again
with ``PushbackMiddleware`` taken out of ``DOWNLOADER_MIDDLEWARES`` (retries per
request only, as plain Scrapy does):

* broken pages: the demo site's ``/wide/`` (1,001 pages) where 1.2 % of pages
  answer 503 twice and 0.6 % one 429 with ``Retry-After: 2``;
* a limiter at R/s: Debian's nginx with ``limit_req`` (R = LIMIT, burst LIMIT,
  429 with ``Retry-After: 3``) in front of python3-doc's library pages;
* an overloaded host: the demo shop's books, 503 above OVERLOAD requests/s;
* a banning host: the demo shop's books, a captcha page for 10 s to a client
  above BAN requests/s.

For each: requests, the share refused, pages stored per second as a share of
what the host allows (the limit; for broken pages, of the same crawl's rate
with every page healthy is not known, so pages/s alone), and the time from the
host's first request to its last.
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

from servers import services
from servers.clients import redis_at
from servers.nginx import PYTHON_DOCS, start_nginx
from tools import pushback_bench

LIMIT = 8  # nginx limit_req, requests/s
OVERLOAD = 5  # the overloaded host serves this many requests/s
BAN = 5  # the banning host bans a client above this many requests/s
SETTINGS = {"MAX_IDLE_TIME_BEFORE_CLOSE": "3", "CLOSESPIDER_TIMEOUT": "400", "LOG_LEVEL": "INFO"}
ALLOW = r"/wide/,/category/books,/product/,/library/[\w.]+\.html$"


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.load(answer)


def _demo_answers(site: services.Service) -> list[tuple[float, str]]:
    report = _get(site.url + "/__pushback")
    return [(float(t), answer) for t, answer in report["answers"]]


def crawl(redis_url: str, settings: dict[str, str], workdir: Path) -> dict[str, dict]:
    client = redis_at(redis_url)
    client.flushall()
    modes = {
        "broken pages": ("127.0.0.50", "broken:0.012:0.006:2"),
        "overloaded": ("127.0.0.51", f"overload:{OVERLOAD}"),
        "banning": ("127.0.0.52", f"ban:{BAN}:10"),
    }
    sites = {
        name: services.start_demo_site(host=host, pushback=mode)
        for name, (host, mode) in modes.items()
    }
    nginx = start_nginx(workdir / "nginx", PYTHON_DOCS, rate=LIMIT,
                                 burst=LIMIT, retry_after=3, host="127.0.0.53")  # fmt: skip
    try:
        client.lpush(
            "site:start_urls",
            sites["broken pages"].url + "/wide/",
            sites["overloaded"].url + "/category/books",
            sites["banning"].url + "/category/books",
            nginx.url + "/library/index.html",
        )
        items = workdir / "items"
        procs = [
            services.start_node(
                "site", redis_url, log=workdir / f"node-{n}.log",
                settings={**SETTINGS, **settings, "ITEMS_DIR": str(items)},
                spider_args={"allow": ALLOW},
            )
            for n in range(2)
        ]  # fmt: skip
        for proc in procs:
            proc.wait(600)
        stored: Counter[str] = Counter()
        for path in items.rglob("*.jsonl"):
            for line in path.read_text().splitlines():
                item = json.loads(line)
                if item["title"] != "Attention required":
                    stored[urlsplit(item["url"]).hostname or ""] += 1
        answers = {name: _demo_answers(site) for name, site in sites.items()}
        log = (workdir / "nginx" / "access.log").read_text().splitlines()
        answers["limiter"] = [
            (float(t), "ok" if status == "200" else status)
            for t, status, path in (line.split() for line in log)
            if path != "/robots.txt"
        ]
        hosts = {"broken pages": "127.0.0.50", "overloaded": "127.0.0.51",
                 "banning": "127.0.0.52", "limiter": "127.0.0.53"}  # fmt: skip
        allowed = {"broken pages": None, "overloaded": OVERLOAD, "banning": BAN, "limiter": LIMIT}
        rows = {}
        for name, host in hosts.items():
            seen = sorted(answers[name])
            seconds = seen[-1][0] - seen[0][0] if len(seen) > 1 else 0.0
            refused = sum(1 for _, answer in seen if answer != "ok")
            state = {k.decode(): v.decode() for k, v in client.hgetall(f"site:host:{host}").items()}
            rows[name] = {
                # host-level decisions (holds and cuts), and refusals taken as a page's
                "cuts": int(state.get("pushbacks", 0)) + int(state.get("bans", 0)),
                "alone": int(state.get("page_refusals", 0)),
                "requests": len(seen),
                "refused": refused / max(len(seen), 1),
                "stored": stored[host],
                "seconds": seconds,
                "pages_per_second": stored[host] / seconds if seconds else 0.0,
                "allowed": allowed[name],
            }
        letters = Counter(
            urlsplit(json.loads(raw).get("url", "")).hostname or "?"
            for raw in client.lrange("site:dlq", 0, -1)
        )
        for name, host in hosts.items():
            rows[name]["dead_lettered"] = letters[host]
        return rows
    finally:
        for site in sites.values():
            site.stop()
        nginx.stop()
        client.close()


def measure(redis_url: str, workdir: Path) -> dict[str, dict]:
    """The crawl with the host backoff on and off (section 17's two variants)."""
    return pushback_bench.measure(redis_url, workdir, crawl)


def report(results: dict[str, dict]) -> None:
    print(
        "\n22. Host pushback on evidence: four kinds of host in one crawl, two nodes, "
        "the project's defaults (no configured rate)"
    )
    for name, rows in results.items():
        print(f"   {name}:")
        print(
            f"     {'host':14s} {'requests':>8s} {'refused':>8s} {'stored':>6s} "
            f"{'pages/s':>8s} {'of allowed':>10s} {'time':>7s} {'held':>5s} {'alone':>5s} "
            f"{'dlq':>4s}"
        )
        for host, row in rows.items():
            share = f"{row['pages_per_second'] / row['allowed']:.2f}" if row["allowed"] else "-"
            print(
                f"     {host:14s} {row['requests']:8d} {row['refused']:8.1%} {row['stored']:6d} "
                f"{row['pages_per_second']:8.2f} {share:>10s} {row['seconds']:6.0f}s "
                f"{row['cuts']:5d} {row['alone']:5d} {row['dead_lettered']:4d}"
            )
    print(
        "   held: the host's refusals, bans or errors held it for the cluster (and cut its\n"
        "   rate); alone: refusals taken as a page's own (its Retry-After honoured, no cut);\n"
        "   dlq: pages dead-lettered (banned BAN_RETRY_TIMES times, or failed for good)"
    )


if __name__ == "__main__":  # one section alone: python -m tools.evidence_bench
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        server = services.start_redis(Path(tmp) / "redis")
        started = time.time()
        try:
            report(measure(server.url, Path(tmp)))
        finally:
            server.stop()
        print(f"   ({time.time() - started:.0f} s)")
    os._exit(0)
