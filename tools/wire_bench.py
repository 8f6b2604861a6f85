"""``make bench`` section 31: HTTPS at the cost of plain HTTP.

* CPU per page over HTTPS and over plain HTTP, Python's documentation (Debian's
  python3-doc, 530 real pages) served whole by Debian's nginx (TLS 1.3, a
  certificate of a CA made here), crawled by plain Scrapy (its default handler,
  certificates verified: ``DOWNLOAD_VERIFY_CERTIFICATES`` with the CA in
  ``SSL_CERT_FILE``; its feed export), by the ``site`` spider and by a
  DistributedSpider (``follow_site``), each one node; the node's own CPU.
* TLS handshakes per page with 1, 2 and 4 nodes on one host of about 1,580 pages
  (the docs under /a/ and /b/, and at the root, where some of their links lead):
  full handshakes, resumed ones and connections, as the nodes counted them and
  as nginx saw them.
Skipped without python3-doc or nginx (``make system-tools`` installs them).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from servers import services
from servers.certificates import TestAuthority
from servers.clients import redis_at
from servers.nginx import PYTHON_DOCS, docs_server_missing, start_tls_nginx
from tools.bench_crawl import BENCH_SPIDERS, NO_ADDON

HOST = "127.0.0.47"
PLAIN, SITE, FOLLOW = "plain Scrapy (feed export)", "the site spider", "a DistributedSpider"
SPIDERS = {PLAIN: "plain_site", SITE: "site", FOLLOW: "follow_site"}
NODES = (1, 2, 4)


def crawl(spider_name: str, redis_url: str, starts: list[str], work: Path, nodes: int,
           env: dict[str, str], extra: dict[str, str]) -> dict:  # fmt: skip
    client = redis_at(redis_url)
    client.flushall()
    shutil.rmtree(work / "items", ignore_errors=True)
    settings: dict[str, str] = {"MAX_IDLE_TIME_BEFORE_CLOSE": "2", "LOG_LEVEL": "WARNING",
                                "ITEMS_DIR": str(work / "items"), **extra,
                                "SPIDER_MODULES": BENCH_SPIDERS}  # fmt: skip
    args = {"allow": r"\.html$"}
    if spider_name == "plain_site":
        feed = {str(work / "items" / "items.jsonl"): {"format": "jsonlines", "overwrite": True}}
        settings.update(
            ADDONS=NO_ADDON, FEEDS=json.dumps(feed), DOWNLOAD_VERIFY_CERTIFICATES="True"
        )
        args["start"] = ",".join(starts)
    else:
        client.lpush(f"{spider_name}:start_urls", *starts)
    procs, logs = [], []
    for n in range(nodes):
        log = work / f"node-{n}.log"
        log.unlink(missing_ok=True)
        logs.append(log)
        procs.append(services.start_node(spider_name, redis_url, log=log, settings=settings,
                                         spider_args=args, env=env))  # fmt: skip
    cpu = sum(services.wait_node(proc, log) for proc, log in zip(procs, logs, strict=True))
    pages = sum(len(path.read_text().splitlines()) for path in (work / "items").rglob("*.jsonl"))
    # what each node's last heartbeat wrote of its TLS connections (wire/part.py)
    records = [client.hgetall(key) for key in client.scan_iter(f"{spider_name}:node:*")]
    client.close()
    return {"pages": pages, "cpu": cpu,
            **{what: sum(int(float(r.get(f"tls_{what}".encode(), 0))) for r in records)
               for what in ("connections", "handshakes", "resumed")}}  # fmt: skip


def measure(redis_url: str, work: Path) -> dict:
    if missing := docs_server_missing():
        return {"skipped": missing}
    work.mkdir(parents=True, exist_ok=True)
    authority = TestAuthority(work / "ca")
    cert = authority.issue("docs", [HOST])
    trust = {"SSL_CERT_FILE": str(authority.pem)}
    ours = {"TLS_CA_BUNDLE": str(authority.pem)}
    result: dict = {"cpu": {}, "handshakes": {}}
    for scheme in ("https", "http"):
        server = start_tls_nginx(work / f"nginx-{scheme}", PYTHON_DOCS, {"docs": cert},
                                 host=HOST, tls=scheme == "https")  # fmt: skip
        try:
            for name, spider in SPIDERS.items():
                extra = ours if spider != "plain_site" and scheme == "https" else {}
                run = crawl(spider, redis_url, [server.url + "/index.html"], work / "run", 1,
                             trust, extra)  # fmt: skip
                result["cpu"][(name, scheme)] = run
        finally:
            server.stop()
    server = start_tls_nginx(work / "nginx-twice", PYTHON_DOCS, {"docs": cert}, host=HOST,
                             copies=("a", "b"))  # fmt: skip
    try:
        for nodes in NODES:
            log = work / "nginx-twice" / "access.log"
            log.write_text("")
            starts = [server.url + "/a/index.html", server.url + "/b/index.html"]
            distinct = {**ours, "CONTENT_DUPLICATES": "off"}  # the copies stand for two sites
            run = crawl("site", redis_url, starts, work / "run", nodes, {}, distinct)
            lines = [line.split() for line in log.read_text().splitlines()]
            run["nginx_connections"] = len({fields[5] for fields in lines})
            run["nginx_resumed"] = len({fields[5] for fields in lines if fields[4] == "r"})
            result["handshakes"][nodes] = run
    finally:
        server.stop()
    return result


def report(result: dict) -> None:
    if "skipped" in result:
        print(f"  skipped: {result['skipped']}")
        return
    print("  CPU per page, one node, Python's docs whole (530 pages), the node's own CPU:")
    print(
        f"  {'':34s} {'HTTPS ms/page':>14s} {'HTTP ms/page':>13s} {'HTTPS/HTTP':>11s} {'pages':>6s}"
    )
    per_page = {}
    for name in SPIDERS:
        https, http = result["cpu"][(name, "https")], result["cpu"][(name, "http")]
        a = 1000 * https["cpu"] / max(https["pages"], 1)
        b = 1000 * http["cpu"] / max(http["pages"], 1)
        per_page[name] = (a, b)
        print(f"  {name:34s} {a:14.2f} {b:13.2f} {a / b if b else 0:10.2f}x {https['pages']:6d}")
    plain = per_page[PLAIN][0]
    for name in (SITE, FOLLOW):
        print(f"  {name} over HTTPS: {per_page[name][0] / plain:.2f}x plain Scrapy's CPU per page "
              f"(target at most 0.5x); {per_page[name][0] / per_page[name][1]:.2f}x its own over "
              "HTTP (target at most 1.1x)")  # fmt: skip
    print("  TLS handshakes per page, the site spider, one host (the docs three times over):")
    print(f"  {'nodes':>6s} {'pages':>6s} {'full/page':>10s} {'resumed':>8s} {'connections':>12s} "
          f"{'nginx: connections':>19s} {'resumed':>8s}")  # fmt: skip
    for nodes, run in result["handshakes"].items():
        full = run["handshakes"] / max(run["pages"], 1)
        print(
            f"  {nodes:6d} {run['pages']:6d} {full:10.3f} {run['resumed']:8d} "
            f"{run['connections']:12d} {run['nginx_connections']:19d} {run['nginx_resumed']:8d}"
        )
    print("  (target at most 0.05 full handshakes a page)")
