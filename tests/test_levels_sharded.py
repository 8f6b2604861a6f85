"""The levels above hosts on a sharded frontier (FRONTIER_SHARDS > 1), against a
real Redis: the lease names each request's domain and address, the node claims
their slots where all levels are (claim_levels.lua), one host of a busy address
at a time, the others given back with the next slots reserved, in turn. Time is
moved by hand (every slot and wait moved nearer), never waited for."""

from __future__ import annotations

import itertools
import time

import pytest

import extensions.clock
from extensions import connection
from extensions.frontier.frontier import LEASE_LEAD_MS, Frontier, now_ms
from extensions.frontier.hosts.claims import RESERVATION_EARLY_MS, LevelClaims, group_host
from extensions.frontier.hosts.state import BAN, Event, HostStates
from extensions.keys import SpiderKeys
from tests.test_frontier import entry

FAR = 3_600_000
ADDRESS = "10.0.0.9"
SHARDS = 4


@pytest.fixture
def keys():
    return SpiderKeys.for_spider("t", shards=SHARDS)


def hosts_in_every_shard(keys, count: int) -> list[str]:
    """``count`` host names, in as many different shards as there are."""
    hosts, shards = [], set()
    for n in range(1000):
        host = f"h{n}.test"
        if keys.shard_of(host) not in shards or len(shards) == SHARDS:
            shards.add(keys.shard_of(host))
            hosts.append(host)
        if len(hosts) == count:
            return hosts
    raise AssertionError("not enough hosts")


def set_rates(redis_client, keys, **rates) -> None:
    """As politeness.py publishes them: in every shard and in the crawl's own keys."""
    for scope in [*keys.all_shards(), keys]:
        redis_client.hset(scope.rates, mapping={"*": 0, **rates})


def describe(redis_client, keys, host: str, address: str, domain: str | None = None) -> None:
    shard = keys.shard(keys.shard_of(host))
    redis_client.hset(shard.host(host), mapping={
        "dom": domain or host, "ip": address, "ipx": now_ms() + FAR})  # fmt: skip


def wake(redis_client, keys) -> None:
    """As if every wait handed out had passed (the levels' slots are not touched)."""
    for shard in keys.all_shards():
        for member in redis_client.zrange(shard.waiting, 0, -1):
            redis_client.zadd(shard.waiting, {member: now_ms() - 1})
        for host_key in redis_client.scan_iter(match=shard.host("*")):
            redis_client.hset(host_key, "next", now_ms() - 1)


def reservations(redis_client, keys) -> dict[str, int]:
    return {
        key.decode().rsplit(":", 1)[1]: int(redis_client.hget(key, "res"))
        for key in redis_client.scan_iter(match=keys.pace("*"))
        if redis_client.hget(key, "res") is not None
    }


def waiting_groups(redis_client, keys) -> dict[bytes, float]:
    found: dict[bytes, float] = {}
    for shard in keys.all_shards():
        found.update(redis_client.zrange(shard.waiting, 0, -1, withscores=True))
    return found


def to_the_first_reservation(redis_client, keys) -> None:
    """As if time had come to when the host of the first slot reserved comes
    back for it: every slot given, every reservation and every wait that much
    nearer."""
    shift = min(reservations(redis_client, keys).values()) - RESERVATION_EARLY_MS - now_ms()
    for key in redis_client.scan_iter(match=keys.pace("*")):
        for field in ("next", "res"):
            if redis_client.hget(key, field) is not None:
                redis_client.hincrby(key, field, -shift)
    for key in [*redis_client.scan_iter(match=keys.address("*")),
                *redis_client.scan_iter(match=keys.domain("*"))]:  # fmt: skip
        if key.endswith(b":booked"):  # a level's slots taken ahead
            booked = redis_client.zrange(key, 0, -1, withscores=True)
            redis_client.delete(key)
            if booked:
                redis_client.zadd(key, {str(int(at - shift)): at - shift for _, at in booked})
        else:
            redis_client.hincrby(key, "next", -shift)
    for shard in keys.all_shards():
        for member, score in redis_client.zrange(shard.waiting, 0, -1, withscores=True):
            redis_client.zadd(shard.waiting, {member: score - shift})
        for host_key in redis_client.scan_iter(match=shard.host("*")):
            redis_client.hset(host_key, "next", now_ms() - 1)


def lease_and_claim(frontier, claims):
    for _ in range(SHARDS):  # a lease asks some shards, the others in turn
        leases, _ = frontier.lease(50, lease_timeout=60)
        if leases:
            break
    admitted, lost = claims.claim_leases(leases)
    assert not lost
    return leases, admitted


# alone: time is moved by hand to the first reservation, but the claim that
# follows reads the real clock; on a loaded machine the next slot, 100 ms on,
# may come within the lead before the claim runs and be given out of turn
@pytest.mark.alone
def test_hosts_of_one_address_in_many_shards_take_its_slots_in_turn(redis_client, keys):
    frontier = Frontier(redis_client, keys, "n1")
    claims = LevelClaims(redis_client, keys, "n1", frontier.send_tolerance, LEASE_LEAD_MS)
    # slots further apart than a reservation is claimed early: one a round
    set_rates(redis_client, keys, **{"*ip": 0.5})
    hosts = hosts_in_every_shard(keys, 5)
    assert len({keys.shard_of(host) for host in hosts}) == SHARDS
    for host in hosts:
        describe(redis_client, keys, host, ADDRESS)
    frontier.enqueue([entry(f"http://{host}/{page}") for page in range(3) for host in hosts])
    leases, admitted = lease_and_claim(frontier, claims)
    # every shard paced its hosts at the address's rate (one each), and named its levels
    assert sorted(group_host(lease) for lease in leases) == sorted(hosts)
    assert all(lease.claim.split(b" ")[1] == ADDRESS.encode() for lease in leases)
    # one slot of the address for the cluster; the others given back, each with
    # the next slot reserved for its host
    assert len(admitted) == 1
    order = [group_host(admitted[0])]
    reserved = sorted(reservations(redis_client, keys).values())
    assert len(reserved) == 4
    spacing = 2000 * (1 + frontier.send_tolerance)
    assert all(b - a == pytest.approx(spacing, abs=1) for a, b in itertools.pairwise(reserved))
    # each host comes back for its slot a moment early (the first, a spacing off, when
    # its lease's own pace lets it): a lease a busy node makes late still meets it
    waits = {connection.text(m): s for m, s in waiting_groups(redis_client, keys).items()}
    for host, at in reservations(redis_client, keys).items():
        if at > min(reserved):
            assert waits[host] == pytest.approx(at - RESERVATION_EARLY_MS, abs=1)
    assert frontier.sizes().queued == 15 - 1  # given back are queued again, nothing lost
    for _ in range(9):
        to_the_first_reservation(redis_client, keys)
        _, admitted = lease_and_claim(frontier, claims)
        # the slot reserved first (and the next, if it comes within the lead)
        assert 1 <= len(admitted) <= 2
        slots = sorted(lease.slot for lease in admitted)
        # (a fast pace's send may come its window late: that much closer to the next)
        closest = (spacing - 1) / 1000 - admitted[0].window
        assert all(b - a >= closest for a, b in itertools.pairwise(slots))
        order += [group_host(lease) for lease in sorted(admitted, key=lambda lease: lease.slot)]
        if len(order) >= 10:
            break
    # every host had a turn before any had a second one, in the order they asked
    assert sorted(order[:5]) == sorted(hosts) and order[5:10] == order[:5]
    assert frontier.sizes().queued == 15 - len(order)


def test_a_slot_at_the_address_is_a_spacing_after_the_last_whatever_shard(redis_client, keys):
    frontier = Frontier(redis_client, keys, "n1")
    claims = LevelClaims(redis_client, keys, "n1", frontier.send_tolerance, LEASE_LEAD_MS)
    set_rates(redis_client, keys, **{"*ip": 10})
    first_host, second_host = hosts_in_every_shard(keys, 2)
    assert keys.shard_of(first_host) != keys.shard_of(second_host)
    for host in (first_host, second_host):
        describe(redis_client, keys, host, ADDRESS)
    frontier.enqueue([entry(f"http://{first_host}/1")])
    [first] = lease_and_claim(frontier, claims)[1]
    assert first.claim.split(b" ")[:2] == [b"", ADDRESS.encode()]  # no domain rate
    frontier.enqueue([entry(f"http://{second_host}/1")])
    # the address's next slot is within the lead: the second host takes it
    next_free = now_ms() + 50
    redis_client.hset(keys.address(ADDRESS), "next", next_free)
    [second] = lease_and_claim(frontier, claims)[1]
    assert second.slot * 1000 >= next_free  # that slot, not sooner (however long the lease)
    assert int(redis_client.hget(keys.address(ADDRESS), "next")) == pytest.approx(
        second.slot * 1000 + 100 * (1 + frontier.send_tolerance), abs=1
    )
    assert redis_client.pttl(keys.address(ADDRESS)) > 0  # gone once idle


def test_a_domain_holds_its_hosts_across_shards_and_addresses(redis_client, keys):
    frontier = Frontier(redis_client, keys, "n1")
    claims = LevelClaims(redis_client, keys, "n1", frontier.send_tolerance, LEASE_LEAD_MS)
    set_rates(redis_client, keys, **{"*domain": 2})
    hosts = hosts_in_every_shard(keys, 3)
    for n, host in enumerate(hosts):
        describe(redis_client, keys, host, f"10.0.1.{n}", domain="shop.test")
    frontier.enqueue([entry(f"http://{host}/1") for host in hosts])
    leases, admitted = lease_and_claim(frontier, claims)
    assert len(leases) == 3 and len(admitted) == 1
    assert len(reservations(redis_client, keys)) == 2


def test_a_host_with_its_own_rate_keeps_it_with_its_levels(redis_client, keys):
    """The host's interval is claimed with its levels: two sends of one host from
    any nodes stay the host's interval apart, even where its address is free."""
    frontier = Frontier(redis_client, keys, "n1")
    claims = LevelClaims(redis_client, keys, "n1", frontier.send_tolerance, LEASE_LEAD_MS)
    set_rates(redis_client, keys, **{"*": 1, "*ip": 50})
    [host] = hosts_in_every_shard(keys, 1)
    describe(redis_client, keys, host, ADDRESS)
    frontier.enqueue([entry(f"http://{host}/{page}") for page in range(2)])
    [first] = lease_and_claim(frontier, claims)[1]
    assert first.claim.split(b" ")[2] == b"1000"
    wake(redis_client, keys)
    redis_client.hset(keys.address(ADDRESS), "next", now_ms() - 1)
    later = lease_and_claim(frontier, claims)[1]
    assert all(lease.slot - first.slot >= 1.0 for lease in later)


def test_a_late_send_claims_its_slot_at_the_levels_too(redis_client, keys):
    states = HostStates(redis_client, keys)
    set_rates(redis_client, keys, **{"*ip": 10})
    [host] = hosts_in_every_shard(keys, 1)
    describe(redis_client, keys, host, ADDRESS)
    assert states.ask_to_send(host, 0.0, 0.0)[0] == "send"
    # another shard's host took the address's slots a while ahead
    redis_client.hset(keys.address(ADDRESS), "next", now_ms() + 5_000)
    wake(redis_client, keys)  # (the host's own next slot has come)
    verdict, when, _ = states.ask_to_send(host, 0.0, 0.0)
    # (its host comes back for the slot reserved a moment early)
    assert verdict == "later" and when * 1000 >= now_ms() + 5_000 - RESERVATION_EARLY_MS - 500


class Clock:
    """The nodes' clock, moved by hand."""

    def __init__(self) -> None:
        self.now = time.time()

    def time(self) -> float:
        return self.now


def test_a_late_request_takes_the_slot_it_reserved_when_it_asks_again(
    redis_client, keys, monkeypatch
):
    """A late request whose slot at its levels is further off reserves it and asks
    again then: it takes that slot, however its host's shard timed the host."""
    clock = Clock()
    monkeypatch.setattr(extensions.clock, "time", clock)  # the nodes' one clock
    monkeypatch.setattr(extensions.clock, "_offset", 0.0)  # (as measured by others: none)
    states = HostStates(redis_client, keys)
    set_rates(redis_client, keys, **{"*ip": 10, "*domain": 5})
    [host] = hosts_in_every_shard(keys, 1)
    describe(redis_client, keys, host, ADDRESS)
    assert states.ask_to_send(host, 0.0, 0.0)[0] == "send"
    slot = clock.now + 0.01  # another request's, leased with it, is sent 50 ms late
    clock.now += 0.05
    answers = []
    for _ in range(6):
        verdict, when, _ = states.ask_to_send(host, slot, 0.02)
        answers.append((verdict, when))
        if verdict != "later":
            break
        clock.now = when
    # (before: every ask missed the slot the one before reserved, for good)
    assert [verdict for verdict, _ in answers] == ["later", "wait"], answers
    assert answers[1][1] == pytest.approx(answers[0][1] + LEASE_LEAD_MS / 1000)  # the one reserved


def test_a_failed_claim_loses_no_lease_and_a_malformed_level_is_counted(redis_client, keys):
    frontier = Frontier(redis_client, keys, "n1")
    claims = LevelClaims(redis_client, keys, "n1", frontier.send_tolerance, LEASE_LEAD_MS)
    set_rates(redis_client, keys, **{"*ip": 10})
    [host] = hosts_in_every_shard(keys, 1)
    describe(redis_client, keys, host, ADDRESS)
    frontier.enqueue([entry(f"http://{host}/1")])
    leases, _ = frontier.lease(50, lease_timeout=60)
    # anyone may write to Redis: the level's slot is not a number
    redis_client.hset(keys.address(ADDRESS), "next", "soon")
    # and a slot taken ahead whose member is not a time: its score is what counts
    redis_client.zadd(keys.address(ADDRESS) + ":booked", {"not a time": now_ms() + 5_000})
    admitted, lost = claims.claim_leases(leases)
    assert len(admitted) == 1 and not lost and claims.bad_fields == 1
    # a level key of the wrong type: the claim fails, the lease is the node's to give back
    frontier.enqueue([entry(f"http://{host}/2")])
    wake(redis_client, keys)
    redis_client.delete(keys.address(ADDRESS))
    redis_client.set(keys.address(ADDRESS), "not a hash")
    leases, _ = frontier.lease(50, lease_timeout=60)
    admitted, lost = claims.claim_leases(leases)
    assert admitted == [] and lost
    assert redis_client.zcard(keys.shard(keys.shard_of(host)).leases("n1")) == 2


def test_a_host_given_back_comes_for_its_reservation_early_unless_it_is_held(redis_client, keys):
    """It waits for its reservation, not its lease's pace; a hold met meanwhile holds."""
    frontier = Frontier(redis_client, keys, "n1")
    claims = LevelClaims(redis_client, keys, "n1", frontier.send_tolerance, LEASE_LEAD_MS)
    set_rates(redis_client, keys, **{"*ip": 0.5})  # slots 2 s apart
    first, second, third = hosts_in_every_shard(keys, 3)
    for host in (first, second, third):
        describe(redis_client, keys, host, ADDRESS)
    frontier.enqueue([entry(f"http://{first}/1")])
    assert len(lease_and_claim(frontier, claims)[1]) == 1  # the address's slot, taken
    frontier.enqueue([entry(f"http://{host}/1") for host in (second, third)])
    leases = [lease for _ in range(SHARDS) for lease in frontier.lease(50, lease_timeout=60)[0]]
    assert sorted(group_host(lease) for lease in leases) == sorted([second, third])
    hold = now_ms() + 30_000  # the third pushed back while its lease was out
    redis_client.hset(keys.shard(keys.shard_of(third)).host(third), "hold", hold)
    admitted, lost = claims.claim_leases(leases)
    assert admitted == [] and not lost  # the next slots are 2 and 4 s off: reserved
    waits = {connection.text(m): s for m, s in waiting_groups(redis_client, keys).items()}
    reserved = reservations(redis_client, keys)[second]
    assert waits[second] == pytest.approx(reserved - RESERVATION_EARLY_MS, abs=1)
    assert waits[third] >= hold
    assert frontier.sizes().queued == 2  # given back, nothing lost


def test_a_host_waiting_for_its_domain_leaves_the_address_to_the_others(redis_client, keys):
    """A host under a busy domain takes its slot where its domain and its address
    are both free; the address's slots before it stay free for other hosts."""
    frontier = Frontier(redis_client, keys, "n1")
    claims = LevelClaims(redis_client, keys, "n1", frontier.send_tolerance, LEASE_LEAD_MS)
    # the domain's slots 2 s apart: a loaded machine once took 500 ms between two leases
    set_rates(redis_client, keys, **{"*domain": 0.5, "*ip": 10})
    first, second, other = hosts_in_every_shard(keys, 3)
    describe(redis_client, keys, first, ADDRESS, domain="shop.test")
    describe(redis_client, keys, second, ADDRESS, domain="shop.test")
    describe(redis_client, keys, other, ADDRESS)
    frontier.enqueue([entry(f"http://{first}/1")])
    [granted] = lease_and_claim(frontier, claims)[1]
    frontier.enqueue([entry(f"http://{second}/1")])
    assert lease_and_claim(frontier, claims)[1] == []  # its domain's next slot: reserved
    domain_slot = reservations(redis_client, keys)[second]
    assert domain_slot - granted.slot * 1000 >= 2000
    frontier.enqueue([entry(f"http://{other}/1")])
    # (the second host may come back for its reservation in the same lease: claimed early)
    admitted = [lease for lease in lease_and_claim(frontier, claims)[1]
                if group_host(lease) == other]  # fmt: skip
    other_slot = admitted[0].slot * 1000 if admitted else reservations(redis_client, keys)[other]
    # the address's next slot, a spacing after the first, long before the domain's
    spacing = 100 * (1 + frontier.send_tolerance)
    assert other_slot - granted.slot * 1000 == pytest.approx(spacing, abs=30)
    assert redis_client.zcard(keys.address(ADDRESS) + ":booked") == 1


def test_two_hosts_of_an_address_held_in_two_shards_hold_the_address(redis_client, keys):
    """Two names of one server refusing say the server refuses, whatever shards
    they are in: the address (in the crawl's own keys) is held and its rate
    halved; one name refusing alone holds that name only."""
    frontier = Frontier(redis_client, keys, "n1")
    claims = LevelClaims(redis_client, keys, "n1", frontier.send_tolerance, LEASE_LEAD_MS)
    states = HostStates(redis_client, keys)
    set_rates(redis_client, keys, **{"*ip": 10})
    first, second, third = hosts_in_every_shard(keys, 3)
    for host in (first, second, third):
        describe(redis_client, keys, host, ADDRESS)
    states.report([Event(first, BAN, retry_after=30.0)])
    assert redis_client.hget(keys.address(ADDRESS), "cut") is None  # one name: its own hold
    states.report([Event(second, BAN, retry_after=30.0)])
    assert keys.shard_of(first) != keys.shard_of(second)
    assert redis_client.hget(keys.address(ADDRESS), "why") == b"ban"
    assert int(redis_client.hget(keys.address(ADDRESS), "next")) >= now_ms() + 29_000
    # the third host's request waits for the address's hold: its slot reserved after it
    frontier.enqueue([entry(f"http://{third}/1")])
    assert lease_and_claim(frontier, claims)[1] == []
    assert reservations(redis_client, keys)[third] >= now_ms() + 29_000
    # (the shards keep no address state of their own)
    assert not list(redis_client.scan_iter(match="{t:*}:ip:*"))


def test_an_address_that_cannot_be_told_loses_no_hold(redis_client, keys):
    """The address's cut is a second call, after the hosts' holds are set: when it
    fails (here an address key of the wrong type) the holds stand and are returned."""
    states = HostStates(redis_client, keys)
    set_rates(redis_client, keys, **{"*ip": 10})
    first, second = hosts_in_every_shard(keys, 2)
    for host in (first, second):
        describe(redis_client, keys, host, ADDRESS)
    redis_client.set(keys.address(ADDRESS) + ":refused", "not a zset")
    [held] = states.report([Event(first, BAN, retry_after=30.0)])
    assert held.group == first and held.until >= time.time() + 29
    shard = keys.shard(keys.shard_of(first))
    assert redis_client.zscore(shard.held, first) is not None


def test_on_a_redis_cluster_the_claims_and_the_address_cut_reach_the_levels_slot(cluster_client):
    """Each call names a key of the levels' slot, so a Redis Cluster routes it there."""
    keys = SpiderKeys.for_spider("t", shards=SHARDS, hash_tag=True)
    states = HostStates(cluster_client, keys)
    set_rates(cluster_client, keys, **{"*ip": 10})
    first, second = hosts_in_every_shard(keys, 2)
    for host in (first, second):
        describe(cluster_client, keys, host, ADDRESS)
    states.report([Event(first, BAN, retry_after=30.0)])
    states.report([Event(second, BAN, retry_after=30.0)])
    assert cluster_client.hget(keys.address(ADDRESS), "why") == b"ban"
    claims = LevelClaims(cluster_client, keys, "n1", 0.02, LEASE_LEAD_MS)
    [(retry, window)] = claims.claim([(first, b" " + ADDRESS.encode() + b" 0", 0.0)])
    assert window is None and retry * 1000 >= now_ms() + 30_000 - RESERVATION_EARLY_MS - 500
