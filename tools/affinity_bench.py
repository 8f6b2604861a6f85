"""``make bench`` section 36: many small HTTPS hosts over several nodes, with host
affinity (``FRONTIER_HOST_AFFINITY``, the default) and without it.

Sixty names resolved to one loopback address by a DNS server on loopback, each
served over TLS 1.3 by Debian's nginx (Python's documentation, a certificate of a
CA made here), ``HOST_PAGE_BUDGET`` pages of each crawled by the ``site`` spider
on 2 and 4 nodes, unpaced and at ``CLUSTER_HOST_RATE = 4``: full TLS handshakes a
page as the nodes counted them (robots.txt included: one fetch a host, by
whichever node met it first), connections as nginx saw them, pages and seconds.
Without affinity a small host's pages spread over every node, each paying a
handshake of its own. Skipped without python3-doc or nginx.

    .venv/bin/python -m tools.affinity_bench
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from servers import services
from servers.certificates import TestAuthority
from servers.nginx import PYTHON_DOCS, docs_server_missing, start_tls_nginx
from tools.wire_bench import crawl

ADDRESS = "127.0.0.49"
NAMES = 60
PAGES = 12  # HOST_PAGE_BUDGET: a small site, as most of the web's hosts are
NODES = (2, 4)
PACING = {"unpaced": "0", "4 requests/s a host": "4"}
AFFINITY = {"affinity (default)": None, "FRONTIER_HOST_AFFINITY = 0": "0"}


def measure(redis_url: str, work: Path) -> dict:
    if missing := docs_server_missing():
        return {"skipped": missing}
    work.mkdir(parents=True, exist_ok=True)
    names = [f"site{n}.test" for n in range(NAMES)]
    authority = TestAuthority(work / "ca")
    cert = authority.issue("many", names)
    zone, queries = work / "zone.json", work / "queries.log"
    zone.write_text(json.dumps({name: {"a": [ADDRESS], "ttl": 300} for name in names}))
    dns = services.start_dns_server(zone, queries)
    server = start_tls_nginx(work / "nginx", PYTHON_DOCS, dict.fromkeys(names, cert),
                             host=ADDRESS, http2=False)  # fmt: skip
    port = server.url.rsplit(":", 1)[1]
    starts = [f"https://{name}:{port}/index.html" for name in names]
    rows: dict = {}
    try:
        for pacing, rate in PACING.items():
            for nodes in NODES:
                for affinity, value in AFFINITY.items():
                    settings = {"TLS_CA_BUNDLE": str(authority.pem), "DNS_SERVERS": dns.url,
                                "HOST_PAGE_BUDGET": str(PAGES), "CLUSTER_HOST_RATE": rate,
                                "CONTENT_DUPLICATES": "off"}  # fmt: skip
                    if value is not None:
                        settings["FRONTIER_HOST_AFFINITY"] = value
                    log = work / "nginx" / "access.log"
                    log.write_text("")
                    began = time.monotonic()
                    run = crawl("site", redis_url, starts, work / "run", nodes, {}, settings)
                    run["seconds"] = time.monotonic() - began
                    lines = [line.split() for line in log.read_text().splitlines()]
                    run["requests"] = len(lines)
                    run["nginx_connections"] = len({fields[5] for fields in lines})
                    rows[(pacing, nodes, affinity)] = run
    finally:
        server.stop()
        dns.stop()
    return {"rows": rows}


def report(result: dict) -> None:
    if "skipped" in result:
        print(f"  skipped: {result['skipped']}")
        return
    print(f"  {NAMES} HTTPS hosts of {PAGES} pages each (HOST_PAGE_BUDGET), the site spider:")
    print(f"  {'':20s} {'nodes':>5s} {'':28s} {'pages':>6s} {'full/page':>10s} "
          f"{'resumed':>8s} {'nginx: connections':>19s} {'/page':>6s} {'seconds':>8s}")  # fmt: skip
    for (pacing, nodes, affinity), run in result["rows"].items():
        pages = max(run["pages"], 1)
        print(f"  {pacing:20s} {nodes:5d} {affinity:28s} {run['pages']:6d} "
              f"{run['handshakes'] / pages:10.3f} {run['resumed']:8d} "
              f"{run['nginx_connections']:19d} {run['nginx_connections'] / pages:6.3f} "
              f"{run['seconds']:8.1f}")  # fmt: skip
    print("  (full/page: full TLS handshakes a page, robots.txt's included; seconds: from the "
          "nodes' start to their end, two idle seconds included)")  # fmt: skip


def main() -> None:
    with tempfile.TemporaryDirectory() as work:
        redis = services.start_redis(Path(work))
        try:
            report(measure(redis.url, Path(work) / "run"))
        finally:
            redis.stop()


if __name__ == "__main__":
    main()
