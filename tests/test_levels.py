"""Politeness above the host (CLUSTER_DOMAIN_RATE, CLUSTER_IP_RATE): three nodes,
names resolved by a real DNS server on loopback the test controls, real HTTP
servers on several loopback addresses. 40 names on one address (20 of them one
registered domain) and 10 names on 10 addresses: every limit is held at the
server's side (robots.txt included, fetched once for the cluster), no host is
starved, the addresses do not slow one another, and a node killed mid-crawl
loses nothing."""

from __future__ import annotations

import json
import signal
import urllib.request
from collections import defaultdict

import pytest

from servers import services
from tests.conftest import scrapy
from tests.helpers import wait_for
from tests.test_dns import queries

DOMAIN_RATE = 5  # requests/s per registered domain, for the cluster
IP_RATE = 10  # requests/s per server address
SHARED = "127.0.0.2"  # the shared host's address: 40 names
OWN = [f"127.0.0.{10 + n}" for n in range(10)]  # one name each
BOOKS = "/category/books"  # 8 pages a name, with allow=BOOKS
FIRST_PAGES = r"/category/books(\?page=[23])?$"  # its first three
# The names serve copies of one shop, standing for distinct sites: content duplicates
# (on by default) would take all but the first for mirrors, and follow none of their links
DISTINCT_SITES = {"CONTENT_DUPLICATES": "off"}


def host_times(site) -> dict[str, list[tuple[float, str]]]:
    with urllib.request.urlopen(site.url + "/__host_times", timeout=10) as response:
        return json.load(response)


def busiest(times: list[float], window: float = 2.0) -> int:
    """The most requests in any ``window`` seconds starting at a request."""
    times, most, start = sorted(times), 0, 0
    for end, t in enumerate(times):
        while t - times[start] >= window:
            start += 1
        most = max(most, end - start + 1)
    return most


def rate_of(times: list[float]) -> float:
    times = sorted(times)
    return (len(times) - 1) / (times[-1] - times[0])


def per_second(times: list[float]) -> list[int]:
    """Requests in each second from the first."""
    counts = [0] * (int(max(times) - min(times)) + 1)
    for t in times:
        counts[int(t - min(times))] += 1
    return counts


def within_limit(times: list[float], rate: float) -> bool:
    """At most 10 % over ``rate`` in any 2-second window (one more for its edge)."""
    return busiest(times) <= 2 * rate * 1.1 + 1


@pytest.fixture
def dns_zone(tmp_path):
    zone, log = tmp_path / "zone.json", tmp_path / "queries.log"
    log.write_text("")
    names = {}
    for n in range(20):
        names[f"blog{n}.one.test"] = {"a": [SHARED], "ttl": 300}  # one registered domain
        names[f"site{n}.test"] = {"a": [SHARED], "ttl": 300}  # twenty of their own
    for n, address in enumerate(OWN):
        names[f"own{n}.test"] = {"a": [address], "ttl": 300}
    zone.write_text(json.dumps(names))
    server = services.start_dns_server(zone, log)
    try:
        yield server, names, log
    finally:
        server.stop()


@pytest.mark.paced  # requests per second, measured at the servers
def test_forty_names_on_one_address_use_its_rate_to_the_end_and_never_more(
    redis_url, redis_client, nodes, dns_zone
):
    """A slow address (CLUSTER_IP_RATE=5: its slots 200 ms apart) shared by forty
    names, two nodes, everything else as users have it: the address is used at
    its rate from the first request to the last, the limit held at every
    moment, and no request waits out its patience in a node."""
    dns, names, _log = dns_zone
    shared = services.start_demo_site(host=SHARED)
    try:
        port = shared.url.rsplit(":", 1)[1]
        on_shared = [name for name, entry in names.items() if entry["a"] == [SHARED]]
        redis_client.lpush("site:start_urls", *[f"http://{n}:{port}{BOOKS}" for n in on_shared])
        for _ in range(2):
            nodes.start("site", redis_url, spider_args={"allow": FIRST_PAGES},
                        MAX_IDLE_TIME_BEFORE_CLOSE=3, DNS_SERVERS=dns.url,
                        CLUSTER_IP_RATE=5, **DISTINCT_SITES)  # fmt: skip
        assert nodes.wait(240) == [0, 0], nodes.tail()
        seen = host_times(shared)
        assert len(seen) == 40 and all(len({p for _, p in s}) == 4 for s in seen.values())
        everything = [t for times in seen.values() for t, _ in times]
        assert within_limit(everything, 5), busiest(everything)
        # 160 requests at 5/s take 32 s: used at 0.98 of the rate where a wake
        # lost to the idle back-off or a margin for a host's gaps left 0.8 of it
        assert rate_of(everything) >= 0.85 * 5, (rate_of(everything), per_second(everything))
        assert nodes.total("politeness/handed_back") == 0
        assert "Traceback" not in nodes.log(0) + nodes.log(1)
    finally:
        shared.stop()


@pytest.mark.paced  # requests per second, measured at the servers
def test_hosts_on_one_address_share_its_rate_and_a_domain_its_own(
    redis_url, redis_client, nodes, dns_zone
):
    dns, names, log = dns_zone
    shared = services.start_demo_site(host=SHARED)
    own = [services.start_demo_site(host=address) for address in OWN]
    try:
        port_of = {SHARED: shared.url.rsplit(":", 1)[1]}
        port_of.update({a: site.url.rsplit(":", 1)[1] for a, site in zip(OWN, own, strict=True)})
        starts = [f"http://{name}:{port_of[entry['a'][0]]}{BOOKS}" for name, entry in names.items()]
        redis_client.lpush("site:start_urls", *starts)
        for _ in range(3):
            nodes.start("site", redis_url, spider_args={"allow": BOOKS},
                        MAX_IDLE_TIME_BEFORE_CLOSE=3, DNS_SERVERS=dns.url,
                        CLUSTER_DOMAIN_RATE=DOMAIN_RATE, CLUSTER_IP_RATE=IP_RATE,
                        **DISTINCT_SITES)  # fmt: skip
        # a node killed mid-crawl: its leases come back to the others, nothing lost
        wait_for(lambda: sum(map(len, host_times(shared).values())) >= 100, 120, "progress")
        nodes.procs[2].send_signal(signal.SIGKILL)
        assert nodes.wait(240) == [0, 0, -signal.SIGKILL], nodes.tail()

        # every request counts, robots.txt too: fetched once for the cluster, it
        # takes a send slot as a page does
        def pages(site, paths: bool = False) -> dict[str, list]:
            found: dict[str, list] = defaultdict(list)
            for host, seen in host_times(site).items():
                found[host.rsplit(":", 1)[0]] += [path if paths else t for t, path in seen]
            return found

        at_shared = pages(shared)
        robots = [p.count("/robots.txt") for p in pages(shared, paths=True).values()]
        assert robots == [1] * 40  # one robots.txt a host, three nodes
        # no host starved: every name got each of its 8 pages (one the killed node
        # had in flight may come twice)
        assert sorted(at_shared) == sorted(n for n in names if names[n]["a"] == [SHARED])
        assert all(len(set(paths)) == 9 for paths in pages(shared, paths=True).values())
        # (at most what the killed node had in flight: CONCURRENT_REQUESTS)
        assert sum(map(len, at_shared.values())) <= 360 + 16
        everything = [t for times in at_shared.values() for t in times]
        one_test = [t for name, times in at_shared.items() if name.endswith(".one.test")
                    for t in times]  # fmt: skip
        # the address held to its rate, the domain to its own, over any 2 seconds
        assert within_limit(everything, IP_RATE), busiest(everything)
        assert within_limit(one_test, DOMAIN_RATE), busiest(one_test)
        # and used: the address at its rate while the other twenty names had work,
        # the domain near its own (its hosts wait for two levels' slots at once)
        sites = [t for name, times in at_shared.items() if name.startswith("site")
                 for t in times]  # fmt: skip
        while_both = [t for t in everything if t <= max(sites)]
        assert rate_of(one_test) >= 0.6 * DOMAIN_RATE, rate_of(one_test)
        assert rate_of(while_both) >= 0.8 * IP_RATE, rate_of(while_both)

        # ten addresses, one name each: each its own line, none slowed by the others
        own_rates = []
        for n, site in enumerate(own):
            found = pages(site)
            assert list(found) == [f"own{n}.test"] and len(found[f"own{n}.test"]) == 9
            assert within_limit(found[f"own{n}.test"], DOMAIN_RATE)
            own_rates.append(rate_of(found[f"own{n}.test"]))
        # at its own domain's pace (a slow level's slots keep a margin, 18 % at 5/s); a
        # host sharing the others' line would get a fraction of it. Nine requests make a
        # short series: one late by a busy moment does not fail it, a slow median does
        assert min(own_rates) >= 0.6 * DOMAIN_RATE, own_rates
        assert sorted(own_rates)[len(own_rates) // 2] >= 0.75 * DOMAIN_RATE, own_rates
        own_ends = [max(t for times in pages(site).values() for t in times) for site in own]
        # each took its 8 pages at its own domain's rate, alongside the shared address
        assert max(own_ends) < max(everything)

        # each name looked up once for the cluster (three nodes)
        for name in names:
            assert [q.split()[1] for q in queries(log, name)] == ["A"], name
        # the hosts' descriptions, for the leases
        assert redis_client.hget("site:host:blog3.one.test", "dom") == b"one.test"
        assert redis_client.hget("site:host:site3.test", "ip") == SHARED.encode()
        for name, entry in names.items():
            assert redis_client.hget(f"site:host:{name}", "ip") == entry["a"][0].encode()

        # seen by address and by domain
        def status(*flags: str) -> dict:
            args = ["status", "site", *flags, "--json", "--limit", "0"]
            return json.loads(scrapy(*args, "-s", f"REDIS_URL={redis_url}").stdout)

        by_address = {row["address"]: row for row in status("--ips")["addresses"]}
        assert by_address[SHARED]["hosts"] == 40 and by_address[SHARED]["fetched"] >= 320
        assert by_address[SHARED]["limit"] == IP_RATE and by_address[SHARED]["queued"] == 0
        assert all(by_address[a]["hosts"] == 1 for a in OWN)
        by_domain = {row["domain"]: row for row in status("--domains")["domains"]}
        assert by_domain["one.test"]["hosts"] == 20 and by_domain["one.test"]["fetched"] >= 160
        logs = "".join(nodes.log(i) for i in range(2))
        assert "Traceback" not in logs
        # nothing waited in NAME:delayed for politeness
        assert nodes.total("frontier/delayed") == 0
    finally:
        shared.stop()
        for site in own:
            site.stop()


@pytest.mark.paced  # requests per second, measured at the servers
def test_a_sharded_frontier_holds_the_address_and_the_domain_for_the_cluster(
    redis_cluster, cluster_client, nodes, dns_zone
):
    """FRONTIER_SHARDS = 4 on a Redis Cluster of three primaries: a domain's and an
    address's hosts are in every shard, and their slots are claimed where the
    levels are, the crawl's own hash slot (hosts/claims.py)."""
    dns, names, _log = dns_zone
    shared = services.start_demo_site(host=SHARED)
    own = [services.start_demo_site(host=address) for address in OWN[:2]]
    chosen = [f"blog{n}.one.test" for n in range(6)] + [f"site{n}.test" for n in range(6)]
    chosen += [f"own{n}.test" for n in range(2)]
    try:
        port_of = {SHARED: shared.url.rsplit(":", 1)[1]}
        port_of.update({a: site.url.rsplit(":", 1)[1] for a, site in zip(OWN, own, strict=False)})
        starts = [f"http://{name}:{port_of[names[name]['a'][0]]}{BOOKS}" for name in chosen]
        cluster_client.lpush("{site}:start_urls", *starts)
        for _ in range(3):
            nodes.start("site", redis_cluster.url, spider_args={"allow": BOOKS}, REDIS_CLUSTER=True,
                        MAX_IDLE_TIME_BEFORE_CLOSE=3, DNS_SERVERS=dns.url, FRONTIER_SHARDS=4,
                        CLUSTER_DOMAIN_RATE=DOMAIN_RATE, CLUSTER_IP_RATE=IP_RATE,
                        **DISTINCT_SITES)  # fmt: skip
        # (a node killed mid-crawl: the unsharded test above; its leases come back
        # the same way)
        assert nodes.wait(240) == [0, 0, 0], nodes.tail()

        paths: dict[str, list[str]] = defaultdict(list)
        times: dict[str, list[float]] = defaultdict(list)
        for host, seen in host_times(shared).items():
            paths[host.rsplit(":", 1)[0]] += [path for _, path in seen]
            times[host.rsplit(":", 1)[0]] += [t for t, _ in seen]
        # no host starved, robots.txt once a host for the cluster, nothing lost or twice
        assert sorted(paths) == sorted(chosen[:12])
        assert all(len(p) == len(set(p)) == 9 and "/robots.txt" in p for p in paths.values())
        everything = [t for seen in times.values() for t in seen]
        one_test = [t for name, seen in times.items() if name.endswith(".one.test") for t in seen]
        assert within_limit(everything, IP_RATE), busiest(everything)
        assert within_limit(one_test, DOMAIN_RATE), busiest(one_test)
        # used: at the address's rate while the hosts had work (the last few, when
        # only a host or two is left, go at their domain's or their own pace)
        steady = sorted(everything)[: len(everything) * 3 // 4]
        assert rate_of(steady) >= 0.85 * IP_RATE, (rate_of(steady), per_second(everything))
        for n, site in enumerate(own):
            seen = [t for found in host_times(site).values() for t, _ in found]
            assert len(seen) == 9 and within_limit(seen, DOMAIN_RATE), n
        # the hosts' descriptions are in their shards; the levels in the crawl's keys
        assert cluster_client.get("{site}:shards") == b"4"
        cluster = ["-s", f"REDIS_URL={redis_cluster.url}", "-s", "REDIS_CLUSTER=True"]
        ips = scrapy("status", "site", "--ips", "--json", "--limit", "0", *cluster).stdout
        by_address = {row["address"]: row for row in json.loads(ips)["addresses"]}
        assert by_address[SHARED]["hosts"] == 12 and by_address[SHARED]["limit"] == IP_RATE
        assert nodes.total("levels/claimed") >= 50 and nodes.total("levels/refused") > 0
        logs = "".join(nodes.log(i) for i in range(3))
        assert "Traceback" not in logs
    finally:
        shared.stop()
        for site in own:
            site.stop()
