"""The lease's levels above the host (CLUSTER_DOMAIN_RATE, CLUSTER_IP_RATE) at the
unit level, against a real Redis: a host not yet described waits and is named; a
level's slot goes to one host, the others wait in its line and take its slots in
turn; a failed lookup holds the host; a name with no address paces alone. Time
is moved by hand (a level's next slot set into the past), never waited for."""

from __future__ import annotations

import pytest

from extensions.frontier.frontier import Frontier, now_ms
from extensions.frontier.hosts.state import BAN, Event, HostStates
from extensions.frontier.results import Lease
from extensions.keys import SpiderKeys
from tests.test_frontier import entry, url_of

FAR = 3_600_000  # ms: an address looked up again in an hour


@pytest.fixture
def keys():
    return SpiderKeys.for_spider("t")


def describe(redis_client, keys, host: str, address: str, domain: str | None = None) -> None:
    redis_client.hset(keys.host(host), mapping={
        "dom": domain or host, "ip": address, "ipx": now_ms() + FAR})  # fmt: skip


def wake_everything(redis_client, keys) -> None:
    """As if the slots handed out had passed: every level free, every wait over."""
    now = now_ms() - 1
    for key in redis_client.scan_iter(match="t:ip:*"):
        if redis_client.type(key) == b"hash":
            redis_client.hset(key, "next", now)
    for key in redis_client.scan_iter(match="t:domain:*"):
        if redis_client.type(key) == b"hash":
            redis_client.hset(key, "next", now)
    for member in redis_client.zrange(keys.lines, 0, -1):
        redis_client.zadd(keys.lines, {member: now})
    for member in redis_client.zrange(keys.waiting, 0, -1):
        redis_client.zadd(keys.waiting, {member: now})
    for key in redis_client.scan_iter(match="t:host:*"):
        redis_client.hset(key, "next", now)


def hosts_of(leases) -> list[str]:
    return [url_of(lease).split("/")[2] for lease in leases]


def test_a_host_not_described_waits_and_is_named_for_the_node(redis_client, keys):
    frontier = Frontier(redis_client, keys, "n1")
    redis_client.hset(keys.rates, mapping={"*": 0, "*ip": 10})
    frontier.enqueue([entry("http://a.test/1"), entry("http://b.test/1")])
    leases, next_due = frontier.lease(10, lease_timeout=60)
    assert leases == [] and next_due is not None
    assert frontier.host_notes.undescribed == {"a.test", "b.test"}
    assert redis_client.zcard(keys.waiting) == 2  # looked at again shortly
    describe(redis_client, keys, "a.test", "10.0.0.1")
    describe(redis_client, keys, "b.test", "10.0.0.2")
    wake_everything(redis_client, keys)
    assert sorted(hosts_of(frontier.lease(10, lease_timeout=60)[0])) == ["a.test", "b.test"]


def test_hosts_on_one_address_take_its_slots_in_turn(redis_client, keys):
    frontier = Frontier(redis_client, keys, "n1")
    redis_client.hset(keys.rates, mapping={"*": 0, "*ip": 10})
    hosts = [f"h{n}.test" for n in range(5)]
    for host in hosts:
        describe(redis_client, keys, host, "10.0.0.9")
    describe(redis_client, keys, "alone.test", "10.0.0.10")
    frontier.enqueue([entry(f"http://{host}/{page}") for page in range(3) for host in hosts])
    frontier.enqueue([entry(f"http://alone.test/{page}") for page in range(3)])
    first = frontier.lease(20, lease_timeout=60)[0]
    # one request for the shared address (its next slot), one for the other address
    assert sorted(hosts_of(first)) == ["alone.test", "h0.test"]
    line = keys.address("10.0.0.9") + ":line"
    assert redis_client.zcard(line) == 4  # the rest wait in the address's line
    assert redis_client.zscore(keys.lines, keys.address("10.0.0.9")) is not None
    order = hosts_of(first)[:1] if hosts_of(first)[0] != "alone.test" else hosts_of(first)[1:]
    for _ in range(9):
        wake_everything(redis_client, keys)
        leases = [lease for lease in frontier.lease(20, lease_timeout=60)[0]
                  if hosts_of([lease]) != ["alone.test"]]  # fmt: skip
        assert len(leases) == 1  # one slot of the address per lease, whoever asks
        order += hosts_of(leases)
    # every host had a turn before any had a second one
    assert sorted(order[:5]) == hosts and sorted(order[5:10]) == hosts
    assert order[5:10] == order[:5]  # in the order they joined the line
    # the address's pace holds for the whole cluster: a slot given next (however
    # soon it is asked for) is one spacing after the last
    again = [lease for lease in frontier.lease(20, lease_timeout=60)[0]
             if hosts_of([lease]) != ["alone.test"]]  # fmt: skip
    spacing = 0.1 * (1 + frontier.send_tolerance)
    assert all(lease.slot >= leases[0].slot + spacing - 0.001 for lease in again)


def test_a_slot_given_for_the_address_is_a_spacing_after_the_last(redis_client, keys):
    frontier = Frontier(redis_client, keys, "n1")
    redis_client.hset(keys.rates, mapping={"*": 0, "*ip": 10})
    for host in ("a.test", "b.test"):
        describe(redis_client, keys, host, "10.0.0.1")
    frontier.enqueue([entry("http://a.test/1"), entry("http://b.test/1")])
    [first] = frontier.lease(10, lease_timeout=60)[0]
    spacing = int(redis_client.hget(keys.address("10.0.0.1"), "next")) - first.slot * 1000
    assert spacing == pytest.approx(100 * (1 + frontier.send_tolerance), abs=1)
    # b's turn: its line woken as the address's next slot comes within the lead
    coming = now_ms() + 50
    redis_client.hset(keys.address("10.0.0.1"), "next", coming)
    redis_client.zadd(keys.lines, {keys.address("10.0.0.1"): now_ms() - 1})
    [second] = frontier.lease(10, lease_timeout=60)[0]
    assert hosts_of([first, second]) == ["a.test", "b.test"]
    assert second.slot * 1000 == pytest.approx(coming, abs=1)  # that slot, not sooner
    assert redis_client.pttl(keys.address("10.0.0.1")) > 0  # gone once idle


def test_a_domain_holds_its_hosts_on_many_addresses(redis_client, keys):
    frontier = Frontier(redis_client, keys, "n1")
    redis_client.hset(keys.rates, mapping={"*": 0, "*domain": 2})
    for n in range(3):
        describe(redis_client, keys, f"s{n}.shop.test", f"10.0.1.{n}", domain="shop.test")
    frontier.enqueue([entry(f"http://s{n}.shop.test/1") for n in range(3)])
    assert len(frontier.lease(10, lease_timeout=60)[0]) == 1
    assert redis_client.zcard(keys.domain("shop.test") + ":line") == 2


def test_a_failed_lookup_holds_the_host_and_a_name_without_address_is_dead_lettered(
    redis_client, keys
):
    frontier = Frontier(redis_client, keys, "n1")
    redis_client.hset(keys.rates, mapping={"*": 0, "*ip": 10})
    until = now_ms() + 30_000
    redis_client.hset(keys.host("failing.test"), mapping={"dom": "failing.test", "ip": "?",
                                                          "ipx": until})  # fmt: skip
    describe(redis_client, keys, "nowhere.test", "-")
    redis_client.hset(keys.host("nowhere.test"), "ipr", "nowhere.test: no such name (NXDOMAIN)")
    frontier.enqueue([entry("http://failing.test/1"), entry("http://nowhere.test/1"),
                      entry("http://nowhere.test/2")])  # fmt: skip
    leases, _ = frontier.lease(10, lease_timeout=60)
    # a name with none: its requests leased to be dead-lettered with the reason, not fetched
    assert leases == []
    dead = frontier.host_notes.unresolvable
    assert sorted(url_of(Lease(member, data)) for member, data, _ in dead) == [
        "http://nowhere.test/1", "http://nowhere.test/2"]  # fmt: skip
    assert {why for _, _, why in dead} == {"nowhere.test: no such name (NXDOMAIN)"}
    assert redis_client.zscore(keys.waiting, "failing.test") == until
    assert frontier.host_notes.undescribed == set()


def test_a_malformed_description_is_ignored_counted_and_asked_again(redis_client, keys):
    frontier = Frontier(redis_client, keys, "n1")
    redis_client.hset(keys.rates, mapping={"*": 0, "*ip": 10})
    redis_client.hset(keys.host("odd.test"), mapping={"ip": "10.0.0.1", "ipx": "soon"})
    frontier.enqueue([entry("http://odd.test/1")])
    assert frontier.lease(10, lease_timeout=60)[0] == []
    assert frontier.tally.bad_host_fields == 1
    assert frontier.host_notes.undescribed == {"odd.test"}
    # a domain or an address no node writes names no level: described again
    redis_client.hset(keys.rates, "*domain", 5)
    for fields in ({"dom": "a b\n", "ip": "10.0.0.1"}, {"dom": "odd.test", "ip": "x" * 300},
                   {"dom": "d" * 300, "ip": "10.0.0.1"}):  # fmt: skip
        redis_client.hset(keys.host("odd.test"), mapping={**fields, "ipx": now_ms() + FAR})
        wake_everything(redis_client, keys)
        frontier.host_notes.undescribed.clear()
        assert frontier.lease(10, lease_timeout=60)[0] == []
        assert frontier.host_notes.undescribed == {"odd.test"}
    assert frontier.tally.bad_host_fields == 4
    assert not list(redis_client.scan_iter(match="t:domain:*")) + list(
        redis_client.scan_iter(match="t:ip:*")
    )


def test_a_level_whose_rate_is_lifted_gives_its_line_back(redis_client, keys):
    frontier = Frontier(redis_client, keys, "n1")
    redis_client.hset(keys.rates, mapping={"*": 0, "*ip": 10})
    for n in range(4):
        describe(redis_client, keys, f"h{n}.test", "10.0.0.9")
    frontier.enqueue([entry(f"http://h{n}.test/1") for n in range(4)])
    assert len(frontier.lease(10, lease_timeout=60)[0]) == 1
    assert redis_client.zcard(keys.address("10.0.0.9") + ":line") == 3
    redis_client.hset(keys.rates, "*ip", 0)  # the limit lifted mid-crawl
    redis_client.zadd(keys.lines, {keys.address("10.0.0.9"): now_ms() - 1})
    assert sorted(hosts_of(frontier.lease(10, lease_timeout=60)[0])) == [
        "h1.test", "h2.test", "h3.test"]  # fmt: skip
    assert redis_client.zcard(keys.lines) == 0


def test_a_second_host_of_an_address_held_holds_the_address_and_halves_its_rate(redis_client, keys):
    """Two names of one server refusing say the server refuses: every host on its
    address waits; one name refusing alone holds that name only."""
    frontier = Frontier(redis_client, keys, "n1")
    states = HostStates(redis_client, keys)
    redis_client.hset(keys.rates, mapping={"*": 0, "*ip": 10})
    for host in ("a.test", "b.test", "c.test"):
        describe(redis_client, keys, host, "10.0.0.9")
    describe(redis_client, keys, "other.test", "10.0.0.10")
    address = keys.address("10.0.0.9")
    states.report([Event("a.test", BAN, retry_after=30.0)])
    assert redis_client.hget(address, "cut") is None  # one name: its own hold only
    frontier.enqueue([entry(f"http://{host}/1") for host in ("c.test", "other.test")])
    assert sorted(hosts_of(frontier.lease(10, lease_timeout=60)[0])) == ["c.test", "other.test"]
    states.report([Event("b.test", BAN, retry_after=30.0)])
    assert redis_client.hget(address, "why") == b"ban"
    assert int(redis_client.hget(address, "next")) >= now_ms() + 29_000
    # every host on the address waits for the hold; another address does not
    frontier.enqueue([entry(f"http://{host}/2") for host in ("c.test", "other.test")])
    wake_everything_but(redis_client, keys, address)
    assert hosts_of(frontier.lease(10, lease_timeout=60)[0]) == ["other.test"]
    # after it, the address is paced at half its rate, climbing back over a minute
    redis_client.hset(address, mapping={"next": now_ms() - 1, "cut": now_ms() - 1})
    wake_everything_but(redis_client, keys, None)
    [lease] = frontier.lease(10, lease_timeout=60)[0]
    assert hosts_of([lease]) == ["c.test"]
    interval = int(redis_client.hget(address, "next")) - lease.slot * 1000
    assert 190 <= interval <= 260  # 200 ms at 5/s (and the tolerance), not 100 ms at 10/s


def test_hosts_held_on_a_malformed_address_slow_no_address_and_are_counted(redis_client, keys):
    """An ip field no node writes names no level: the holds stay the hosts' own."""
    states = HostStates(redis_client, keys)
    redis_client.hset(keys.rates, mapping={"*": 0, "*ip": 10})
    for host in ("a.test", "b.test"):
        describe(redis_client, keys, host, "10.0.0.9; DEL everything")
    states.report([Event("a.test", BAN, retry_after=30.0)])
    states.report([Event("b.test", BAN, retry_after=30.0)])
    assert states.bad_fields >= 2
    assert not list(redis_client.scan_iter(match="t:ip:*"))
    assert float(redis_client.hget(keys.host("b.test"), "hold")) > now_ms()


def wake_everything_but(redis_client, keys, held: str | None) -> None:
    """wake_everything, leaving ``held``'s next slot as it is."""
    kept = redis_client.hget(held, "next") if held else None
    wake_everything(redis_client, keys)
    if kept is not None:
        redis_client.hset(held, "next", kept)
