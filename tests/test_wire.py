"""HTTPS as sites serve it (extensions/wire/): Debian's nginx with certificates of
a CA the tests make, over TLS 1.3 and HTTP/2, serving Python's documentation, its
names resolved to a loopback address by a DNS server the tests control. Certificates
are verified by default; one that fails is dead-lettered as tls_error with the
reason; connections are kept alive and TLS sessions resumed; HTTP/2 by setting."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from servers import services
from servers.certificates import TestAuthority
from servers.nginx import PYTHON_DOCS, start_tls_nginx
from tests.conftest import read_items, scrapy

ADDRESS = "127.0.0.43"
# Python's library pages a to c: 43 real pages, linked from one another
ALLOW = r"/library/[a-c][a-z]*\.html$"
NAMES = ("docs.test", "expired.test", "elsewhere.test", "unsigned.test")

pytestmark = pytest.mark.skipif(
    not (shutil.which("nginx") or Path("/usr/sbin/nginx").exists()) or not PYTHON_DOCS.is_dir(),
    reason="nginx-light and python3-doc come with make system-tools",
)


@pytest.fixture
def https_sites(tmp_path):
    """One nginx for four names (by SNI): docs.test with a good certificate,
    expired.test with an expired one, elsewhere.test with other.test's, and
    unsigned.test with a self-signed one; and the DNS server naming them."""
    authority = TestAuthority(tmp_path / "ca")
    sites = {
        "docs.test": authority.issue("docs", ["docs.test"]),
        "expired.test": authority.issue("expired", ["expired.test"], expired=True),
        "elsewhere.test": authority.issue("elsewhere", ["other.test"]),
        "unsigned.test": authority.issue("unsigned", ["unsigned.test"], self_signed=True),
    }
    zone, log = tmp_path / "zone.json", tmp_path / "queries.log"
    zone.write_text(json.dumps({name: {"a": [ADDRESS], "ttl": 300} for name in NAMES}))
    dns = services.start_dns_server(zone, log)
    nginx = start_tls_nginx(tmp_path / "nginx", PYTHON_DOCS, sites, host=ADDRESS,
                            keepalive_requests=20)  # fmt: skip
    try:
        yield authority, nginx, dns
    finally:
        nginx.stop()
        dns.stop()


def answers(tmp_path: Path) -> list[dict]:
    rows = []
    for line in (tmp_path / "nginx" / "access.log").read_text().splitlines():
        t, status, path, host, reused, connection, protocol = line.split()
        rows.append({"t": float(t), "status": status, "path": path, "host": host,
                     "reused": reused == "r", "connection": connection,
                     "protocol": protocol})  # fmt: skip
    return rows


def url(nginx, name: str, path: str = "/library/index.html") -> str:
    return f"https://{name}:{nginx.url.rsplit(':', 1)[1]}{path}"


def test_https_pages_are_verified_kept_alive_and_resumed_and_bad_certificates_dead_lettered(
    redis_url, redis_client, nodes, https_sites, tmp_path
):
    authority, nginx, dns = https_sites
    redis_client.lpush("site:start_urls", *(url(nginx, name) for name in NAMES))
    for n in range(2):
        nodes.start("site", redis_url, {"allow": ALLOW}, NODE_ID=f"n{n}",
                    MAX_IDLE_TIME_BEFORE_CLOSE=3, DNS_SERVERS=dns.url,
                    TLS_CA_BUNDLE=authority.pem)  # fmt: skip
    assert nodes.wait(180) == [0, 0], nodes.tail()

    served = [a for a in answers(tmp_path) if a["path"] != "/robots.txt"]
    # only the host whose certificate verified was ever asked for a page
    assert {a["host"] for a in served} == {"docs.test"}
    pages = {a["path"] for a in served if a["status"] == "200"}
    stored = {
        item["url"].split(":", 2)[2].partition("/")[2] for item in read_items(tmp_path / "items")
    }
    assert {"/" + path for path in stored} == pages
    assert len(pages) >= 40
    # each of the others dead-lettered for its robots.txt and its start page, at
    # their first try, saying why
    letters = [json.loads(raw) for raw in redis_client.lrange("site:dlq", 0, -1)]
    assert sorted(letter["url"].split("/", 3)[3] for letter in letters) == sorted(
        ["robots.txt", "library/index.html"] * 3)  # fmt: skip
    assert all(letter["kind"] == "tls_error" for letter in letters), letters
    reasons = {letter["url"].split("/")[2].split(":")[0]: letter["error"] for letter in letters}
    assert set(reasons) == {"expired.test", "elsewhere.test", "unsigned.test"}
    assert "has expired" in reasons["expired.test"]
    assert "another host's certificate" in reasons["elsewhere.test"]
    assert "self-signed" in reasons["unsigned.test"]
    assert nodes.total("failed/tls_error") == 6

    # every connection nginx served on did one handshake the nodes counted, and
    # past each node's first, resumed the node's session (no certificate exchange)
    connections = {a["connection"] for a in served}
    handshakes, resumed = nodes.total("tls/handshakes"), nodes.total("tls/resumed")
    assert handshakes + resumed == len(connections), (handshakes, resumed, len(connections))
    assert len({a["connection"] for a in served if a["reused"]}) == resumed
    assert handshakes <= 2 * 8 and resumed >= len(connections) - handshakes
    # the same counts for the cluster, by host and by node, in scrapy status
    shown = scrapy("status", "site", "--hosts", "--json", "-s", f"REDIS_URL={redis_url}")
    by_host = {row["host"]: row["tls"] for row in json.loads(shown.stdout)["hosts"]}
    assert by_host["docs.test"] == {"connections": nodes.total("tls/connections") - 6,
                                    "handshakes": handshakes, "resumed": resumed}  # fmt: skip
    assert by_host["expired.test"] == {"connections": 2, "handshakes": 0, "resumed": 0}
    # and the node that leased the host last, where its connection is warm
    rows = json.loads(shown.stdout)["hosts"]
    [node] = [row["node"] for row in rows if row["host"] == "docs.test"]
    assert node in {"n0", "n1"}
    text = scrapy("status", "site", "--hosts", "-s", f"REDIS_URL={redis_url}").stdout
    assert f"TLS {len(connections)} connections, {handshakes} handshakes" in text, text
    assert f"resumed; node {node}" in text, text
    # every answer over HTTP/1.1: HTTP/2 only by setting
    assert Counter(a["protocol"] for a in served) == Counter({"HTTP/1.1": len(served)})


def test_without_the_ca_bundle_the_system_trust_store_refuses_the_tests_ca(
    redis_url, redis_client, nodes, https_sites, tmp_path
):
    _authority, nginx, dns = https_sites
    redis_client.lpush("site:start_urls", url(nginx, "docs.test"))
    nodes.start("site", redis_url, {"allow": ALLOW}, MAX_IDLE_TIME_BEFORE_CLOSE=2,
                DNS_SERVERS=dns.url)  # fmt: skip
    assert nodes.wait(120) == [0], nodes.tail()
    assert [a for a in answers(tmp_path) if a["path"] != "/robots.txt"] == []
    letters = [json.loads(raw) for raw in redis_client.lrange("site:dlq", 0, -1)]
    assert len(letters) == 2  # robots.txt and the page, each at its first try
    assert {letter["kind"] for letter in letters} == {"tls_error"}
    assert all("not signed by an authority the node trusts" in x["error"] for x in letters)


def test_http2_by_setting_for_the_hosts_that_offer_it(redis_url, redis_client, nodes, tmp_path):
    """Two servers of the same pages: one offers HTTP/2 (h2 by ALPN), the other
    HTTP/1.1 alone (nginx answers an offer of h2 alone with TLS's alert 120)."""
    authority = TestAuthority(tmp_path / "ca")
    h2 = start_tls_nginx(
        tmp_path / "nginx",
        PYTHON_DOCS,
        {"h2": authority.issue("h2", ["127.0.0.45"])},
        host="127.0.0.45",
    )
    h1 = start_tls_nginx(tmp_path / "h1", PYTHON_DOCS,
                         {"h1": authority.issue("h1", ["127.0.0.44"])}, host="127.0.0.44",
                         http2=False)  # fmt: skip
    try:
        redis_client.lpush("site:start_urls", h2.url + "/library/index.html",
                           h1.url + "/library/index.html")  # fmt: skip
        nodes.start(
            "site",
            redis_url,
            {"allow": ALLOW},
            MAX_IDLE_TIME_BEFORE_CLOSE=3,
            TLS_CA_BUNDLE=authority.pem,
            HTTP2_ENABLED=True,
            CONTENT_DUPLICATES="off",
        )  # fmt: skip  (the two serve the same pages)
        assert nodes.wait(180) == [0], nodes.tail()
    finally:
        h1.stop()
        h2.stop()
    over_h2 = [a for a in answers(tmp_path) if a["path"] != "/robots.txt"]
    assert len(over_h2) >= 40
    assert {a["protocol"] for a in over_h2} == {"HTTP/2.0"}
    assert len({a["path"] for a in over_h2}) == len(over_h2)  # each page once
    # a connection for many requests: each a stream on it
    assert len({a["connection"] for a in over_h2}) <= len(over_h2) / 10
    lines = (tmp_path / "h1" / "access.log").read_text().splitlines()
    assert len(lines) >= 40 and all(line.endswith("HTTP/1.1") for line in lines)
    assert nodes.stat(0, "http2/hosts_without") == 1
    assert nodes.stat(0, "http2/responses") == len(answers(tmp_path))  # robots.txt too
    assert redis_client.llen("site:dlq") == 0
