"""DNS shared by the cluster (DNS_SHARED): two nodes resolve a host once between
them, through a real DNS server on loopback whose names the test controls; a
name that does not exist is asked once and its requests dead-lettered with the
reason; a server that fails is asked again, never kept; a record in Redis that
is not one is ignored and replaced."""

from __future__ import annotations

import json

import pytest

from demosite import catalog
from extensions.dns.records import NXDOMAIN, PENDING, Answer, parse
from extensions.dns.resolver import servers_setting
from extensions.frontier.deadletter import parse_record
from servers import services
from tests.helpers import page_hits


@pytest.fixture
def dns_server(tmp_path):
    zone, log = tmp_path / "zone.json", tmp_path / "queries.log"
    zone.write_text("{}")
    log.write_text("")
    server = services.start_dns_server(zone, log)
    try:
        yield server, zone, log
    finally:
        server.stop()


def queries(log, name: str) -> list[str]:
    return [line for line in log.read_text().splitlines() if line.split()[0] == name]


def test_two_nodes_resolve_a_host_once_and_a_name_that_does_not_exist_is_dead_lettered(
    redis_url, redis_client, demo_site, nodes, dns_server
):
    server, zone, log = dns_server
    port = demo_site.url.rsplit(":", 1)[1]
    zone.write_text(json.dumps({
        "shop.test": {"a": ["127.0.0.1"], "ttl": 120},
        "other.test": {"a": ["127.0.0.1"], "ttl": 2},  # under DNS_CACHE_MIN_TTL
        "broken.test": "servfail",
        "bare.test": {"ttl": 60},  # a name with no address
    }))  # fmt: skip
    # a record another writer left that is not one: ignored, counted, replaced
    redis_client.set("site:dns:other.test", b'{"a": ["not an address"]}')
    redis_client.lpush(
        "site:start_urls",
        f"http://shop.test:{port}/category/books",
        f"http://other.test:{port}/about",
        f"http://gone.test:{port}/about",
        f"http://broken.test:{port}/about",
        f"http://bare.test:{port}/about",
    )
    settings = {"DNS_SHARED": True, "DNS_SERVERS": server.url, "MAX_IDLE_TIME_BEFORE_CLOSE": 2}
    for _ in range(2):
        nodes.start("site", redis_url, spider_args={"allow": "/category/books,/product/,/about"},
                    **settings)  # fmt: skip
    assert nodes.wait(180) == [0, 0], nodes.tail()

    # every page of the shop's books, through the name, each once (/about twice:
    # one host each)
    hits = page_hits(demo_site)
    assert hits.get("/category/books") == 1 and hits.get("/about") == 2, hits
    assert sum(1 for path in hits if path.startswith("/product/")) >= 10
    # two nodes, many requests (robots.txt, pages, retries): one A query each name
    assert [q.split()[1] for q in queries(log, "shop.test")] == ["A"]
    assert [q.split()[1] for q in queries(log, "other.test")] == ["A"]
    assert [q.split()[1] for q in queries(log, "gone.test")] == ["A"]
    # (those that fail are asked again: once a try, A then AAAA for the bare name)
    bare_lookups = [q for q in queries(log, "bare.test") if q.split()[1] == "A"]
    assert nodes.total("dns/lookups") == 3 + len(queries(log, "broken.test")) + len(bare_lookups)
    assert nodes.total("dns/bad_records") == 1
    assert nodes.total("dns/nxdomain") == 1

    # the cluster's cache: the answers with their TTL, kept at least DNS_CACHE_MIN_TTL
    assert parse(redis_client.get("site:dns:shop.test")) == Answer(("127.0.0.1",))
    assert 60 < redis_client.ttl("site:dns:shop.test") <= 120
    assert 2 < redis_client.ttl("site:dns:other.test") <= 60
    assert parse(redis_client.get("site:dns:gone.test")) == Answer(error=NXDOMAIN)

    # the name that does not exist: its request dead-lettered with the reason
    letters = [parse_record(raw) for raw in redis_client.lrange("site:dlq", 0, -1)]
    gone = [letter for letter in letters if letter and letter["url"].endswith("gone.test:"
            f"{port}/about")]  # fmt: skip
    assert len(gone) == 1 and "no such name (NXDOMAIN)" in gone[0]["error"], letters
    # a server that fails is not an answer: asked again at each try, never kept
    broken = [letter for letter in letters if letter and letter["url"].endswith(
        f"broken.test:{port}/about")]  # fmt: skip
    assert len(broken) == 1 and "the DNS server failed (SERVFAIL)" in broken[0]["error"]
    assert len(queries(log, "broken.test")) >= 3  # the page's three tries at least
    assert nodes.total("dns/servfail") == len(queries(log, "broken.test"))
    assert not redis_client.exists("site:dns:broken.test")
    # a name with no address: said so, its claim released, asked again at each try
    bare = [letter for letter in letters if letter and letter["url"].endswith(
        f"bare.test:{port}/about")]  # fmt: skip
    assert len(bare) == 1 and "no address in DNS" in bare[0]["error"], letters
    assert not redis_client.exists("site:dns:bare.test")
    assert nodes.total("dns/no_address") >= 3

    # a node that comes later reads the cluster's answer and asks DNS nothing (of
    # the two above, one may have had no page of a resolved name)
    garden = catalog.product_ids("garden")[0]
    redis_client.lpush("site:start_urls", f"http://shop.test:{port}/product/{garden}")
    nodes.start("site", redis_url, spider_args={"allow": "/about"}, **settings)
    assert nodes.wait(120) == [0, 0, 0], nodes.tail()
    assert page_hits(demo_site).get(f"/product/{garden}") == 1
    assert nodes.stat(2, "dns/shared") == 1 and nodes.stat(2, "dns/lookups") == 0
    assert [q.split()[1] for q in queries(log, "shop.test")] == ["A"]


def test_with_an_address_rate_a_name_without_address_is_dead_lettered_and_never_fetched(
    redis_url, redis_client, demo_site, nodes, dns_server
):
    server, zone, log = dns_server
    port = demo_site.url.rsplit(":", 1)[1]
    zone.write_text(json.dumps({"shop.test": {"a": ["127.0.0.1"], "ttl": 120}}))
    gone = [f"http://gone.test:{port}/about", f"http://gone.test:{port}/contact"]
    redis_client.lpush("site:start_urls", f"http://shop.test:{port}/category/books", *gone)
    for _ in range(2):
        nodes.start("site", redis_url, spider_args={"allow": "/category/books"},
                    MAX_IDLE_TIME_BEFORE_CLOSE=2, DNS_SERVERS=server.url,
                    CLUSTER_IP_RATE=50)  # fmt: skip
    assert nodes.wait(180) == [0, 0], nodes.tail()
    assert sum(1 for path in page_hits(demo_site) if path.startswith("/category/books")) == 8
    letters = [parse_record(raw) for raw in redis_client.lrange("site:dlq", 0, -1)]
    assert sorted(letter["url"] for letter in letters) == sorted(gone), letters
    assert all(letter["kind"] == "no_address" and "no such name (NXDOMAIN)" in letter["error"]
               and json.loads(letter["request"])["url"] in gone for letter in letters)  # fmt: skip
    # asked of the DNS once for the cluster, never fetched nor retried
    assert [q.split()[1] for q in queries(log, "gone.test")] == ["A"]
    assert nodes.total("levels/dead_lettered") == 2 and nodes.total("retry/count") == 0
    assert redis_client.hget("site:host:gone.test", "ip") == b"-"


def test_a_cached_record_is_read_as_hostile():
    assert parse(b'{"a": ["192.0.2.1", "2001:db8::1"]}') == Answer(("192.0.2.1", "2001:db8::1"))
    assert parse(b'{"error": "NXDOMAIN"}') == Answer(error=NXDOMAIN)
    assert parse(PENDING) == Answer(pending=True)
    for raw in (None, b"", b"not json", b"[]", b'{"a": []}', b'{"a": ["192.0.2.1", 7]}',
                b'{"a": ["example.com"]}', b'{"a": "192.0.2.1"}', b'{"error": "SERVFAIL"}',
                b'{"a": ["192.0.2.1"]}' + b" " * 5000):  # fmt: skip
        assert parse(raw) is None, raw


def test_dns_servers_are_addresses_with_ports():
    assert servers_setting(["192.0.2.53", "127.0.0.1:5353", "[2001:db8::53]:5300", "::1"]) == [
        ("192.0.2.53", 53), ("127.0.0.1", 5353), ("2001:db8::53", 5300), ("::1", 53)]  # fmt: skip
    for bad in (["dns.example.com"], ["127.0.0.1:0"], ["127.0.0.1:http"]):
        with pytest.raises(ValueError):
            servers_setting(bad)
