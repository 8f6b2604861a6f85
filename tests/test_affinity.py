"""Host affinity (FRONTIER_HOST_AFFINITY): a host's requests go to the node that
leased it last, where its connection is warm, against a real Redis."""

import time
from collections import defaultdict

from extensions.frontier.frontier import Frontier, now_ms
from extensions.keys import SpiderKeys
from tests.test_frontier import entry, url_of

KEYS = SpiderKeys.for_spider("t")


def host_of(url: str) -> str:
    return url.split("/")[2]


def lease_hosts(frontier: Frontier, count: int) -> list[str]:
    leased, _ = frontier.lease(count, lease_timeout=60)
    return [host_of(url_of(lease)) for lease in leased]


def test_each_host_stays_with_the_node_that_leased_it_while_both_have_work(redis_client):
    one, two = Frontier(redis_client, KEYS, "n1"), Frontier(redis_client, KEYS, "n2")
    hosts = [f"h{n}" for n in range(8)]
    one.enqueue([entry(f"https://{host}/{page}") for host in hosts for page in range(5)])
    nodes_of = defaultdict(set)
    for _ in range(5):
        for node in (one, two):
            for host in lease_hosts(node, 4):
                nodes_of[host].add(node.node_id)
    assert sorted(nodes_of) == hosts
    assert all(len(nodes) == 1 for nodes in nodes_of.values()), dict(nodes_of)
    assert {next(iter(nodes)) for nodes in nodes_of.values()} == {"n1", "n2"}
    assert two.left_to_owners > 0  # the first node's hosts, at the head of the ready list
    assert one.taken_over == two.taken_over == 0
    assert one.sizes().queued == 0


def test_without_affinity_the_same_leases_spread_hosts_over_both_nodes(redis_client):
    """What the test above would see with no affinity: the behaviour it guards."""
    one = Frontier(redis_client, KEYS, "n1", host_affinity=0)
    two = Frontier(redis_client, KEYS, "n2", host_affinity=0)
    hosts = [f"h{n}" for n in range(8)]
    one.enqueue([entry(f"https://{host}/{page}") for host in hosts for page in range(5)])
    nodes_of = defaultdict(set)
    for _ in range(5):
        for node in (one, two):
            for host in lease_hosts(node, 4):
                nodes_of[host].add(node.node_id)
    assert any(len(nodes) == 2 for nodes in nodes_of.values())


def test_a_node_with_nothing_else_takes_another_node_s_unpaced_host(redis_client):
    """No node idles while a host it could fetch has work: it takes the host over."""
    one, two = Frontier(redis_client, KEYS, "n1"), Frontier(redis_client, KEYS, "n2")
    one.enqueue([entry(f"https://big/{page}") for page in range(10)])
    assert lease_hosts(one, 2) == ["big", "big"]
    assert lease_hosts(two, 3) == ["big"] * 3
    assert two.taken_over == 3
    # the host is the taker's now: the first node leaves it unless it is short
    assert redis_client.hget(KEYS.host("big"), "aff") == b"n2"
    one.enqueue([entry(f"https://own/{page}") for page in range(2)])
    assert lease_hosts(one, 2) == ["own", "own"]


def test_a_paced_host_waits_for_its_node_until_its_claim_ends(redis_client):
    one, two = Frontier(redis_client, KEYS, "n1"), Frontier(redis_client, KEYS, "n2")
    redis_client.hset(KEYS.rates, mapping={"*": 0, "slow": 2})  # 2 requests/s
    one.enqueue([entry(f"https://slow/{page}") for page in range(4)])
    assert lease_hosts(one, 4) == ["slow"]
    claim_end = int(redis_client.hget(KEYS.host("slow"), "aff_until"))
    next_slot = int(redis_client.hget(KEYS.host("slow"), "next"))
    # at most one spacing (or FRONTIER_HOST_AFFINITY) past the moment it is ready
    assert next_slot < claim_end <= next_slot + 500
    redis_client.zadd(KEYS.waiting, {"slow": now_ms() - 1})  # its wait is over
    leased, next_due = two.lease(4, lease_timeout=60)
    assert leased == [] and two.left_to_owners == 1
    assert next_due is not None and abs(next_due * 1000 - claim_end) <= 1  # looks again then
    assert lease_hosts(one, 4) == ["slow"]  # its node takes it, at its next slot
    # a claim its node let pass: any node takes the host
    redis_client.zadd(KEYS.waiting, {"slow": now_ms() - 1})
    claim_end = int(redis_client.hget(KEYS.host("slow"), "aff_until"))
    deadline = time.monotonic() + 5
    while now_ms() <= claim_end and time.monotonic() < deadline:
        time.sleep(0.05)
    assert lease_hosts(two, 4) == ["slow"]
    assert redis_client.hget(KEYS.host("slow"), "aff") == b"n2"


def test_a_dead_node_s_hosts_are_anyone_s_at_once(redis_client):
    one, two = Frontier(redis_client, KEYS, "n1"), Frontier(redis_client, KEYS, "n2")
    redis_client.hset(KEYS.rates, mapping={"*": 0, "slow": 2})
    one.enqueue([entry(f"https://slow/{page}") for page in range(4)])
    assert lease_hosts(one, 4) == ["slow"]
    redis_client.zadd(KEYS.waiting, {"slow": now_ms() - 1})
    # its last heartbeat is older than NODE_TIMEOUT
    redis_client.zadd(KEYS.nodes, {"n1": now_ms() - 60_000})
    assert lease_hosts(two, 4) == ["slow"]
    assert two.left_to_owners == 0


def test_a_malformed_claim_another_writer_left_is_ignored_and_counted(redis_client):
    one, two = Frontier(redis_client, KEYS, "n1"), Frontier(redis_client, KEYS, "n2")
    one.enqueue([entry(f"https://odd/{page}") for page in range(2)])
    redis_client.hset(KEYS.host("odd"), mapping={"aff": "n1", "aff_until": "soon", "aff_paced": 1})
    redis_client.zadd(KEYS.nodes, {"n1": now_ms()})
    assert lease_hosts(two, 2) == ["odd", "odd"]
    assert two.bad_host_fields == 1 and two.left_to_owners == 0
