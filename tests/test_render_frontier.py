"""The render lane of the frontier, against a real Redis: render requests wait
in groups of their own (HOST!render), only a node that asks for render work
leases them, and both lanes keep one pace, one hold and one budget per host."""

import hashlib
import itertools
import json

import pytest

from extensions.crawlid import host_of, is_render_group, render_group, split_group
from extensions.frontier.crawls.state import Crawls
from extensions.frontier.frontier import Frontier, now_ms
from extensions.frontier.groups import clean, queue_group_for
from extensions.frontier.upkeep import Upkeep
from extensions.keys import SpiderKeys


def entry(url: str, render: bool = False, crawl: str = ""):
    meta: dict = {"render": True} if render else {}
    if crawl:
        meta["crawl_id"] = crawl
    data = {"url": url, "meta": meta}
    group = queue_group_for(url, meta)
    fingerprint = hashlib.sha1(f"{crawl}{url}".encode()).digest()
    return (fingerprint, group, 0, json.dumps(data).encode())


def urls(leases) -> list[str]:
    return sorted(json.loads(lease.data)["url"] for lease in leases)


@pytest.fixture
def keys():
    return SpiderKeys.for_spider("t")


@pytest.fixture
def frontier(redis_client, keys):
    return Frontier(redis_client, keys, "n1")


def frontier_count(redis_client, keys, field: str) -> int:
    return int(redis_client.hget(keys.frontier, field) or 0)


def test_a_render_request_queues_in_its_hosts_render_lane():
    assert queue_group_for("http://Shop.example/a", {"render": True}) == "shop.example!render"
    group = queue_group_for("http://shop.example/a", {"render": True, "crawl_id": "j1"})
    assert group == "shop.example!render#j1"
    assert split_group(group) == ("shop.example!render", "j1")
    assert host_of(group) == "shop.example" and is_render_group(group)
    assert render_group("shop.example#j1") == group and render_group(group) == group
    assert not is_render_group("shop.example#j1")
    # only a true flag renders; a host or slot name cannot fake the lane
    assert queue_group_for("http://shop.example/a", {"render": "yes"}) == "shop.example"
    assert clean("evil!render") == "evil%21render"
    assert queue_group_for("http://h/", {"download_slot": "x!render"}, by="slot") == "x%21render"


def test_a_node_that_cannot_render_never_leases_a_render_request(frontier, redis_client, keys):
    frontier.enqueue([entry(f"http://h{i}/js", render=True) for i in range(3)])
    frontier.enqueue([entry("http://h0/plain")])
    assert frontier_count(redis_client, keys, "queued") == 4
    assert frontier_count(redis_client, keys, "render_queued") == 3
    leased, _ = frontier.lease(10, lease_timeout=60)  # no render_count: a plain node
    assert urls(leased) == ["http://h0/plain"]
    leased, _ = frontier.lease(10, lease_timeout=60)
    assert leased == []
    assert frontier.sizes().render_queued == 3  # still waiting for a render node
    render_node = Frontier(redis_client, keys, "r1")
    leased, _ = render_node.lease(10, lease_timeout=60, shares={"render_count": 2})
    assert len(leased) == 2 and all("/js" in url for url in urls(leased))
    leased += render_node.lease(10, lease_timeout=60, shares={"render_count": 2})[0]
    assert len(leased) == 3
    assert frontier_count(redis_client, keys, "queued") == 0
    assert frontier_count(redis_client, keys, "render_queued") == 0


def test_a_render_node_leases_plain_work_too(frontier, redis_client, keys):
    frontier.enqueue([entry("http://a/1"), entry("http://b/1", render=True)])
    leased, _ = frontier.lease(10, lease_timeout=60, shares={"render_count": 4})
    assert urls(leased) == ["http://a/1", "http://b/1"]


def test_both_lanes_of_a_host_keep_its_one_pace(frontier, redis_client, keys):
    redis_client.hset(keys.rates, "slow", 2)  # 2 requests per second, both lanes together
    frontier.enqueue([entry(f"http://slow/p{i}") for i in range(3)])
    frontier.enqueue([entry(f"http://slow/r{i}", render=True) for i in range(3)])
    leased = frontier.lease(10, lease_timeout=60, shares={"render_count": 10})[0]
    assert redis_client.exists(keys.host("slow!render")) == 0  # no politeness of its own
    # one series of send slots for the host: every two sends, either lane, 0.5 s apart
    slots = sorted(lease.slot for lease in leased)
    assert all(later - earlier >= 0.5 for earlier, later in itertools.pairwise(slots))
    assert len(leased) <= 2  # a slot each, not the burst two lanes would take alone
    served: list = list(leased)
    for _ in range(6):
        redis_client.zadd(keys.waiting, {"slow": 0, "slow!render": 0}, xx=True)
        redis_client.hset(keys.host("slow"), "next", now_ms())  # as if the interval passed
        served += frontier.lease(10, lease_timeout=60, shares={"render_count": 10})[0]
    assert len(served) == 6
    assert int(redis_client.hget(keys.host("slow"), "leased")) == 6


def test_a_held_host_holds_its_render_lane(frontier, redis_client, keys):
    frontier.enqueue([entry("http://held/1", render=True), entry("http://free/1", render=True)])
    redis_client.hset(keys.host("held"), "hold", now_ms() + 60_000)
    leased, _ = frontier.lease(10, lease_timeout=60, shares={"render_count": 10})
    assert urls(leased) == ["http://free/1"]
    assert redis_client.zscore(keys.waiting, "held!render") > now_ms() + 50_000


def test_a_host_page_budget_counts_both_lanes(redis_client, keys):
    frontier = Frontier(redis_client, keys, "n1", budget=3)
    frontier.enqueue([entry(f"http://h/p{i}") for i in range(2)])
    frontier.enqueue([entry(f"http://h/r{i}", render=True) for i in range(2)])
    assert frontier_count(redis_client, keys, "queued") == 3
    assert redis_client.hget(keys.host("h"), "accepted") == b"4"
    assert redis_client.exists(keys.host("h!render")) == 0


def test_a_dead_render_nodes_leases_go_back_to_the_render_lane(frontier, redis_client, keys):
    frontier.enqueue([entry("http://h/js", render=True)])
    render_node = Frontier(redis_client, keys, "r1")
    render_node.heartbeat()
    leased, _ = render_node.lease(10, lease_timeout=60, shares={"render_count": 4})
    assert len(leased) == 1
    redis_client.zadd(keys.nodes, {"r1": now_ms() - 60_000})  # its heartbeat stopped
    assert frontier.reclaim(node_timeout=10).requests == {"r1": 1}
    assert frontier.lease(10, lease_timeout=60)[0] == []  # not to a plain node
    assert frontier_count(redis_client, keys, "render_queued") == 1
    again, _ = Frontier(redis_client, keys, "r2").lease(
        10, lease_timeout=60, shares={"render_count": 4}
    )
    assert urls(again) == ["http://h/js"]


def test_render_work_of_crawls_takes_turns_and_a_stopped_crawl_drains_it(
    frontier, redis_client, keys
):
    crawls = Crawls(redis_client, keys)
    crawls.register("a")
    crawls.register("b")
    frontier.enqueue([entry(f"http://h{i % 4}/a{i}", True, "a") for i in range(8)])
    frontier.enqueue([entry(f"http://h{i % 4}/b{i}", True, "b") for i in range(8)])
    leased, _ = frontier.lease(0, lease_timeout=60, shares={"render_count": 4})
    assert sorted(split_group(lease.member.split(b"\n")[0].decode())[1] for lease in leased) == [
        "a",
        "a",
        "b",
        "b",
    ]
    crawls.stop("b")
    assert crawls.figures("b").queued == 0
    assert frontier_count(redis_client, keys, "render_queued") == 6  # a's left
    paused = crawls.pause("a")
    assert paused is not None
    assert frontier.lease(0, lease_timeout=60, shares={"render_count": 10})[0] == []
    crawls.resume("a")
    assert len(frontier.lease(0, lease_timeout=60, shares={"render_count": 10})[0]) == 6


def test_render_lanes_in_a_sharded_frontier(redis_client):
    keys = SpiderKeys.for_spider("t", shards=4)
    frontier = Frontier(redis_client, keys, "n1")
    frontier.enqueue([entry(f"http://h{i}/js", render=True) for i in range(12)])
    frontier.enqueue([entry(f"http://h{i}/plain") for i in range(12)])
    assert frontier.sizes().render_queued == 12
    plain: list = []
    for _ in range(20):
        plain += frontier.lease(12, lease_timeout=60)[0]
    assert len(plain) == 12 and all("plain" in url for url in urls(plain))
    rendered: list = []
    for _ in range(20):
        rendered += frontier.lease(4, lease_timeout=60, shares={"render_count": 4})[0]
    assert len(rendered) == 12
    assert frontier.sizes().render_queued == 0


class Stats:
    def __init__(self):
        self.values: dict = {}

    def inc_value(self, key, count=1):
        self.values[key] = self.values.get(key, 0) + count


def test_learned_patterns_are_the_clusters_and_bounded(redis_client):
    from extensions.render.policy import LearnedRender

    def node(max_patterns=2):
        return LearnedRender(redis_client, "t:render_auto", refresh=0.0,
                             max_patterns=max_patterns, stats=Stats())  # fmt: skip

    one, other = node(), node()
    assert not other.needs_render("h/js/")
    one.learn("h/js/")
    assert other.needs_render("h/js/")  # another node sees it (no cache at refresh=0)
    one.learn("h/a/")
    one.learn("h/b/")  # past RENDER_AUTO_MAX_PATTERNS: not kept, not even locally
    assert set(redis_client.hkeys("t:render_auto")) == {b"h/js/", b"h/a/", b"#changes"}
    assert not one.needs_render("h/b/") and one.stats.values["render/auto/patterns_full"] == 1
    other.forget("h/js/")
    assert not one.needs_render("h/js/")
    # a node keeps what it looked up for RENDER_AUTO_REFRESH seconds ...
    cached = LearnedRender(redis_client, "t:render_auto", refresh=60.0, max_patterns=3,
                           stats=Stats())  # fmt: skip
    assert cached.needs_render("h/a/") and not cached.needs_render("h/new/")
    redis_client.hdel("t:render_auto", "h/a/")
    assert cached.needs_render("h/a/")
    # ... but what another node learns since reaches it once the change count moved
    one.max_patterns = 3
    one.learn("h/new/")
    assert not cached.needs_render("h/new/")  # read the count less than a second ago
    cached._version_read -= LearnedRender.VERSION_EVERY
    assert cached.needs_render("h/new/")


def test_clearing_the_frontier_clears_its_render_lane(frontier, redis_client, keys):
    frontier.enqueue([entry("http://h/js", render=True)])
    redis_client.zadd(keys.named("render_nodes"), {"r1": now_ms()})
    redis_client.hset(keys.named("render_auto"), "h/js/", 1)
    Upkeep(frontier).clear()
    assert frontier.sizes().render_queued == 0
    left = {key.decode() for key in redis_client.scan_iter("t:*")}
    assert not left & {"t:ready:render", "t:turns:render", "t:render_nodes", "t:render_auto"}
    assert not [key for key in left if "render" in key], left
