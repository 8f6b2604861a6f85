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


def nodes_by_host(one: Frontier, two: Frontier) -> dict[str, set[str]]:
    """Eight hosts of five pages, leased four at a time by the two nodes in turn:
    the nodes each host's requests went to."""
    one.enqueue([entry(f"https://h{host}/{page}") for host in range(8) for page in range(5)])
    nodes_of = defaultdict(set)
    for _ in range(5):
        for node in (one, two):
            for host in lease_hosts(node, 4):
                nodes_of[host].add(node.node_id)
    assert sorted(nodes_of) == [f"h{host}" for host in range(8)]
    assert one.sizes().queued == 0
    return nodes_of


def test_each_host_stays_with_the_node_that_leased_it_while_both_have_work(redis_client):
    one, two = Frontier(redis_client, KEYS, "n1"), Frontier(redis_client, KEYS, "n2")
    nodes_of = nodes_by_host(one, two)
    assert all(len(nodes) == 1 for nodes in nodes_of.values()), dict(nodes_of)
    assert {next(iter(nodes)) for nodes in nodes_of.values()} == {"n1", "n2"}
    assert two.tally.left_to_owners > 0  # the first node's hosts, at the head of the ready list
    assert one.tally.taken_over == two.tally.taken_over == 0


def test_without_affinity_the_same_leases_spread_hosts_over_both_nodes(redis_client):
    """What the test above would see with no affinity: the behaviour it guards."""
    one = Frontier(redis_client, KEYS, "n1", host_affinity=0)
    two = Frontier(redis_client, KEYS, "n2", host_affinity=0)
    assert any(len(nodes) == 2 for nodes in nodes_by_host(one, two).values())


def test_a_node_with_nothing_else_takes_another_node_s_host_at_once(redis_client):
    """No node idles while a host it could fetch has work: it takes the host over,
    and the host is its own from then on."""
    one, two = Frontier(redis_client, KEYS, "n1"), Frontier(redis_client, KEYS, "n2")
    one.enqueue([entry(f"https://big/{page}") for page in range(10)])
    assert lease_hosts(one, 2) == ["big", "big"]
    assert lease_hosts(two, 3) == ["big"] * 3
    assert two.tally.taken_over == 3
    assert redis_client.hget(KEYS.host("big"), "aff") == b"n2"
    # the first node, with work of its own, leaves the host to the second
    one.enqueue([entry(f"https://own/{page}") for page in range(2)])
    assert lease_hosts(one, 2) == ["own", "own"]


def test_a_paced_host_is_nobody_s(redis_client):
    """Between its slots a paced host's node is as idle as any, and idle nodes
    take the host: affinity would only make the others start hosts of their own."""
    one, two = Frontier(redis_client, KEYS, "n1"), Frontier(redis_client, KEYS, "n2")
    redis_client.hset(KEYS.rates, mapping={"*": 0, "slow": 2})
    one.enqueue([entry(f"https://slow/{page}") for page in range(4)])
    assert lease_hosts(one, 1) == ["slow"]
    assert redis_client.hget(KEYS.host("slow"), "aff") is None
    two.enqueue([entry(f"https://own/{page}") for page in range(20)])  # work of its own
    redis_client.zadd(KEYS.waiting, {"slow": now_ms() - 1})  # its wait is over
    assert "slow" in lease_hosts(two, 4) and two.tally.left_to_owners == 0


def test_a_host_waits_for_its_node_at_most_the_affinity_while_others_have_work(redis_client):
    one, two = Frontier(redis_client, KEYS, "n1"), Frontier(redis_client, KEYS, "n2")
    one.enqueue([entry(f"https://held/{page}") for page in range(8)])
    assert lease_hosts(one, 1) == ["held"]
    two.enqueue([entry(f"https://own/{page}") for page in range(200)])  # work of its own
    assert lease_hosts(two, 4) == ["own"] * 4 and two.tally.left_to_owners == 1
    assert lease_hosts(one, 1) == ["held"]  # its node comes, and takes some more
    # its node does not come: the host waits for it FRONTIER_HOST_AFFINITY (1 s)
    # from the moment another node first passes it over, then goes to that node
    passed_over = now_ms()
    assert lease_hosts(two, 4) == ["own"] * 4
    hosts: list[str] = []
    deadline = time.monotonic() + 5
    while "held" not in hosts and time.monotonic() < deadline:
        hosts = lease_hosts(two, 1)
        time.sleep(0.05)
    assert hosts == ["held"] and now_ms() - passed_over >= 1000
    assert redis_client.hget(KEYS.host("held"), "aff") == b"n2"
    assert two.tally.taken_over == 0  # waited out, not taken for want of work


def test_a_host_stays_its_node_s_while_its_queue_is_empty(redis_client):
    """A small host's next pages come after its first is parsed: the host is still
    its node's then (its connection kept alive), not anyone's."""
    one, two = Frontier(redis_client, KEYS, "n1"), Frontier(redis_client, KEYS, "n2")
    one.enqueue([entry("https://small/"), entry("https://other/")])
    assert lease_hosts(one, 1) == ["small"]
    time.sleep(1.1)  # longer than FRONTIER_HOST_AFFINITY: the page took its time
    two.enqueue([entry(f"https://small/{page}") for page in range(3)])
    assert lease_hosts(two, 4) == ["other"]
    assert sorted(lease_hosts(one, 4)) == ["small"] * 3


def test_a_dead_node_s_hosts_are_anyone_s_at_once(redis_client):
    one, two = Frontier(redis_client, KEYS, "n1"), Frontier(redis_client, KEYS, "n2")
    one.enqueue([entry(f"https://gone/{page}") for page in range(4)])
    assert lease_hosts(one, 1) == ["gone"]
    # its last heartbeat is older than NODE_TIMEOUT
    redis_client.zadd(KEYS.nodes, {"n1": now_ms() - 60_000})
    assert lease_hosts(two, 4) == ["gone"] * 3
    assert two.tally.left_to_owners == 0


def test_a_malformed_claim_another_writer_left_is_ignored_and_counted(redis_client):
    one, two = Frontier(redis_client, KEYS, "n1"), Frontier(redis_client, KEYS, "n2")
    one.enqueue([entry(f"https://odd/{page}") for page in range(4)])
    two.enqueue([entry(f"https://own/{page}") for page in range(4)])
    redis_client.zadd(KEYS.nodes, {"n1": now_ms()})
    redis_client.hset(KEYS.host("odd"), mapping={"aff": "n1", "aff_until": "soon"})
    assert sorted(lease_hosts(two, 2)) == ["odd", "own"]  # not a number: no hold
    assert two.tally.bad_host_fields == 1 and two.tally.left_to_owners == 0
    # a wait's start that is not a number reads as none: the wait begins now
    until = now_ms() + 60_000
    redis_client.hset(KEYS.host("odd"), mapping={"aff": "n1", "aff_until": until, "aff_wait": "-3"})
    assert lease_hosts(two, 2) == ["own", "own"]
    assert two.tally.bad_host_fields == 2 and two.tally.left_to_owners == 1


def test_hosts_paced_by_a_shared_address_have_no_affinity(redis_client):
    """With CLUSTER_IP_RATE the address's slot is every host's on it: it must not
    wait for one node."""
    one, two = Frontier(redis_client, KEYS, "n1"), Frontier(redis_client, KEYS, "n2")
    redis_client.hset(KEYS.rates, mapping={"*": 0, "*ip": 10})
    redis_client.hset(KEYS.host("shared"), mapping={"dom": "shared", "ip": "10.0.0.1",
                                                    "ipx": now_ms() + 3_600_000})  # fmt: skip
    one.enqueue([entry(f"https://shared/{page}") for page in range(4)])
    assert lease_hosts(one, 4) == ["shared"]
    redis_client.zadd(KEYS.waiting, {"shared": now_ms() - 1})
    deadline = time.monotonic() + 5
    taken: list[str] = []
    while not taken and time.monotonic() < deadline:  # the address's next slot
        taken = lease_hosts(two, 4)
        time.sleep(0.02)
    assert taken == ["shared"] and two.tally.left_to_owners == 0
    assert redis_client.hget(KEYS.host("shared"), "aff") is None
