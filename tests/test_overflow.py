"""FRONTIER_OVERFLOW at the frontier's level: real Redis, MongoDB (nx-27017 or
TEST_MONGO_URI), the real scripts; each spill and refill step run by hand."""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

import pytest

from extensions.frontier.frontier import Frontier
from extensions.frontier.groups import group_for
from extensions.frontier.overflow.spilling import Overflow
from extensions.frontier.overflow.store import MongoOverflow
from extensions.frontier.overflow.turn import TAKE, OverflowLimits, take_keys
from extensions.frontier.redisops import fields, run_named
from extensions.keys import SpiderKeys


class Stats:
    """What Overflow counts into (Scrapy's collector needs a crawler)."""

    def __init__(self):
        self.values: dict[str, int] = {}

    def inc_value(self, key: str, count: int = 1) -> None:
        self.values[key] = self.values.get(key, 0) + count

    def max_value(self, key: str, value: int) -> None:
        self.values[key] = max(self.values.get(key, 0), value)


def entry(url: str, priority: int = 0):
    data: dict[str, Any] = {"url": url}
    if priority:
        data["priority"] = priority
    fingerprint = hashlib.sha1(url.encode()).digest()
    return (fingerprint, group_for(url), priority, json.dumps(data).encode())


@pytest.fixture
def overflow_setup(redis_client, mongo_db):
    uri, database, db = mongo_db
    made: list[Overflow] = []
    dead: list[dict] = []

    def make(name: str = "t", node: str = "n1", queue_max: int = 5, shards: int = 1,
             batch: int = 1000) -> tuple[Frontier, Overflow]:  # fmt: skip
        keys = SpiderKeys.for_spider(name, shards=shards)
        frontier = Frontier(redis_client, keys, node)
        redis_client.zadd(keys.nodes, {node: 10**13})  # alive
        overflow = Overflow(
            frontier,
            MongoOverflow(uri, database, f"{name}_frontier"),
            OverflowLimits(queue_max=queue_max, batch=batch, interval=1.0, backlog_max=1000,
                           node_timeout=30.0),
            stats=Stats(), dead_letter=lambda **record: dead.append(record),
            resumed=lambda: None,
        )  # fmt: skip
        for shard in frontier.shards:
            redis_client.hset(shard.frontier, "host_queue_max", queue_max)
        made.append(overflow)
        return frontier, overflow

    make.db = db  # type: ignore[attr-defined]
    make.dead = dead  # type: ignore[attr-defined]
    yield make
    for overflow in made:
        overflow.store.close()


def drain(frontier: Frontier, overflow: Overflow, limit: int = 10_000) -> list[str]:
    """Lease everything, one request at a time, running turns as a node would;
    each lease is released at once (the page is done)."""
    urls: list[str] = []
    for _ in range(limit):
        leased, _ = frontier.lease(1, lease_timeout=60)
        if not leased:
            overflow.turn_done(overflow.turn())
            leased, _ = frontier.lease(1, lease_timeout=60)
            if not leased:
                if frontier.sizes().queued == 0:
                    return urls
                continue
        for lease in leased:
            urls.append(json.loads(lease.data)["url"])
        frontier.release([lease.member for lease in leased])
        overflow.turn_done(overflow.turn())
    raise AssertionError("the frontier did not drain")


def test_a_group_keeps_its_bound_in_redis_and_the_rest_comes_back_in_order(overflow_setup):
    frontier, overflow = overflow_setup(queue_max=5)
    urls = [f"http://a.test/{n}" for n in range(40)]
    high = [f"http://a.test/high{n}" for n in range(3)]
    frontier.enqueue([entry(url) for url in urls[:30]])
    frontier.enqueue([entry(url, priority=5) for url in high])  # found later, better
    frontier.enqueue([entry(url) for url in urls[30:]])
    keys = frontier.keys
    assert frontier.server.zcard(keys.queue("a.test")) == 5
    sizes = frontier.sizes()
    assert sizes.queued == 43 and sizes.spilled == 38
    overflow.turn()
    assert overflow.store.waiting_count("a.test") == 38
    assert frontier.server.llen(keys.named("spill")) == 0
    assert drain(frontier, overflow) == high + urls
    sizes = frontier.sizes()
    assert (sizes.queued, sizes.spilled) == (0, 0)
    assert overflow.store.waiting_count() == 0
    assert not frontier.server.exists(keys.named("overflow", group="a.test"))


def test_hosts_with_little_work_never_touch_mongodb(overflow_setup):
    frontier, overflow = overflow_setup(queue_max=5)
    frontier.enqueue([entry(f"http://small{n}.test/{i}") for n in range(20) for i in range(5)])
    assert frontier.server.llen(frontier.keys.named("spill")) == 0
    overflow.turn()
    assert overflow_setup.db["t_frontier"].count_documents({}) == 0


def test_a_request_found_while_the_group_has_work_in_mongodb_waits_its_turn(overflow_setup):
    frontier, overflow = overflow_setup(queue_max=4)
    frontier.enqueue([entry(f"http://a.test/{n}") for n in range(10)])
    overflow.turn()
    first, _ = frontier.lease(3, lease_timeout=60)
    frontier.release([lease.member for lease in first])
    # later than everything in MongoDB: out of Redis too, though the queue has room
    frontier.enqueue([entry("http://a.test/late")])
    assert frontier.server.zcard(frontier.keys.queue("a.test")) == 1
    overflow.turn()
    rest = drain(frontier, overflow)
    assert rest == [f"http://a.test/{n}" for n in range(3, 10)] + ["http://a.test/late"]


def take_spill_batch(overflow: Overflow, keys: SpiderKeys, node: str) -> list[bytes]:
    """What a node's turn takes first: a spill batch moved into ``node``'s journal
    (overflow_take.lua), before it is written to MongoDB."""
    script_keys = take_keys(keys, node)
    args = {"node": node, "now": 1, "batch": 1000, "claim_ms": 60000, "groups": 0,
            "queue_prefix": keys.queue("")}  # fmt: skip
    return fields(run_named(overflow.scripts.script(TAKE), script_keys, args))["batch"]


def test_a_node_dying_after_its_spill_write_leaves_nothing_doubled(overflow_setup, redis_client):
    frontier, dying = overflow_setup(node="dies", queue_max=2)
    keys = frontier.keys
    frontier.enqueue([entry(f"http://a.test/{n}") for n in range(8)])
    # the dying node took a batch and wrote it, and died before Redis heard
    batch = take_spill_batch(dying, keys, "dies")
    assert len(batch) == 6
    from extensions.frontier.overflow.store import SpillRecord

    dying.follow_epoch()
    dying.store.write([SpillRecord.parse(raw) for raw in batch])
    redis_client.zrem(keys.nodes, "dies")  # its heartbeat is gone
    on_peer, peer = overflow_setup(node="peer", queue_max=2)
    assert drain(on_peer, peer) == [f"http://a.test/{n}" for n in range(8)]
    assert not redis_client.exists(keys.named("spilling", node="dies"))
    assert frontier.sizes().queued == 0 and peer.store.waiting_count() == 0


def test_a_node_dying_mid_refill_leaves_nothing_doubled(overflow_setup, redis_client):
    frontier, overflow = overflow_setup(node="dies", queue_max=2)
    keys = frontier.keys
    frontier.enqueue([entry(f"http://a.test/{n}") for n in range(6)])
    overflow.turn()
    leased, _ = frontier.lease(2, lease_timeout=60)
    frontier.release([lease.member for lease in leased])
    # the refill queued its requests, and the node died before MongoDB heard
    overflow._settle = lambda *args: None  # type: ignore[method-assign]
    overflow.turn()
    assert redis_client.hlen(keys.named("refilled")) == 2
    assert overflow.store.waiting_count("a.test") == 4  # still waiting there too
    redis_client.zrem(keys.nodes, "dies")
    on_peer, peer = overflow_setup(node="peer", queue_max=2)
    rest = drain(on_peer, peer)
    assert rest == [f"http://a.test/{n}" for n in range(2, 6)]
    assert redis_client.hlen(keys.named("refilled")) == 0
    assert peer.store.waiting_count() == 0


def test_a_stopped_crawl_drops_what_it_has_in_mongodb(overflow_setup, redis_client):
    from extensions.frontier.crawls.state import Crawls

    frontier, overflow = overflow_setup(queue_max=2)
    keys = frontier.keys
    frontier.enqueue([entry(f"http://a.test/{n}") for n in range(3)])
    crawl_entries = [
        (hashlib.sha1(f"c{n}".encode()).digest(), "b.test#one", 0,
         json.dumps({"url": f"http://b.test/{n}"}).encode())
        for n in range(6)
    ]  # fmt: skip
    crawls = Crawls(redis_client, keys)
    crawls.ensure("one")
    frontier.enqueue(crawl_entries)
    overflow.turn()
    assert frontier.sizes().spilled == 5
    crawls.stop("one")
    for _ in range(5):
        overflow.turn()
    urls = drain(frontier, overflow)
    assert urls == [f"http://a.test/{n}" for n in range(3)]
    assert frontier.sizes().queued == 0 and frontier.sizes().spilled == 0
    assert int(redis_client.hget(keys.crawl("one"), "queued") or 0) == 0


def test_a_document_that_is_not_a_request_is_dead_lettered_not_queued(overflow_setup):
    frontier, overflow = overflow_setup(queue_max=2)
    frontier.enqueue([entry(f"http://a.test/{n}") for n in range(4)])
    overflow.turn()
    collection = overflow_setup.db["t_frontier"]
    third = collection.find_one({"g": "a.test"}, sort=[("s", 1)])
    collection.update_one({"_id": third["_id"]}, {"$set": {"r": 42}})
    not_ours = {"_id": 7, "e": overflow.store.epoch, "g": "a.test", "s": -1, "t": None}
    collection.insert_one(not_ours)
    urls = drain(frontier, overflow)
    assert urls == ["http://a.test/0", "http://a.test/1", "http://a.test/3"]
    errors = sorted(record["error"] for record in overflow_setup.dead)
    assert len(errors) == 2 and all("not a request" in error for error in errors)
    assert frontier.sizes().queued == 0


def test_a_sharded_frontier_spills_every_shard_to_one_collection(overflow_setup):
    # more shards than a turn looks at: they are visited in turn
    frontier, overflow = overflow_setup(queue_max=3, shards=40)
    hosts = [f"h{n}.test" for n in range(8)]
    frontier.enqueue([entry(f"http://{host}/{i}") for host in hosts for i in range(10)])
    for _ in range(3):
        overflow.turn()
    assert overflow.store.waiting_count() == 8 * 7
    urls = drain(frontier, overflow)
    assert sorted(urls) == sorted(f"http://{host}/{i}" for host in hosts for i in range(10))
    for host in hosts:
        mine = [url for url in urls if url.startswith(f"http://{host}/")]
        assert mine == [f"http://{host}/{i}" for i in range(10)]


def test_a_request_back_from_mongodb_may_go_out_again_before_its_document_is_marked(
    overflow_setup,
):
    # Between a refill's script and its marking the documents taken, better
    # requests push the one just back out again: its second trip is a document
    # of its own, which the marking of the first leaves waiting.
    frontier, overflow = overflow_setup(queue_max=2)
    frontier.enqueue([entry(f"http://a.test/{n}") for n in range(6)])
    overflow.turn()
    leased, _ = frontier.lease(2, lease_timeout=60)
    frontier.release([lease.member for lease in leased])
    settle = overflow._settle

    def better_ones_arrive_first(*args):
        frontier.enqueue([entry(f"http://a.test/high{n}", priority=5) for n in range(2)])
        settle(*args)

    overflow._settle = better_ones_arrive_first  # type: ignore[method-assign]
    overflow.turn()
    overflow._settle = settle  # type: ignore[method-assign]
    rest = drain(frontier, overflow)
    assert rest == ["http://a.test/high0", "http://a.test/high1"] + [
        f"http://a.test/{n}" for n in range(2, 6)
    ]
    assert frontier.sizes().queued == 0


def test_a_refill_whose_claim_ran_out_does_nothing(overflow_setup, redis_client):
    frontier, overflow = overflow_setup(queue_max=2)
    keys = frontier.keys
    frontier.enqueue([entry(f"http://a.test/{n}") for n in range(6)])
    overflow.turn()
    leased, _ = frontier.lease(2, lease_timeout=60)
    frontier.release([lease.member for lease in leased])
    waiting = overflow.store.waiting

    def slow_read(*args):
        found = waiting(*args)
        redis_client.zadd(keys.named("refill"), {"a.test": 1})  # another node's claim meanwhile
        return found

    overflow.store.waiting = slow_read  # type: ignore[method-assign]
    overflow.turn()
    overflow.store.waiting = waiting  # type: ignore[method-assign]
    assert redis_client.zcard(keys.queue("a.test")) == 0  # nothing queued by the late one
    assert redis_client.hlen(keys.named("refilled")) == 0
    assert drain(frontier, overflow) == [f"http://a.test/{n}" for n in range(2, 6)]


def test_a_crawl_wiped_from_redis_and_begun_again_neither_reads_nor_meets_the_old_one(
    overflow_setup, redis_client
):
    frontier, overflow = overflow_setup(queue_max=2)
    frontier.enqueue([entry(f"http://a.test/old{n}") for n in range(6)])
    overflow.turn()
    assert overflow.store.waiting_count() == 4
    redis_client.flushdb()  # the crawl is gone from Redis (SCHEDULER_FLUSH_ON_START, by hand)
    frontier, overflow = overflow_setup(queue_max=2)
    overflow.turn()  # the first node of the new crawl drops the old documents
    assert overflow_setup.db["t_frontier"].count_documents({}) == 0
    # the new crawl's requests have the old ones' ids: none is taken for another
    frontier.enqueue([entry(f"http://a.test/new{n}") for n in range(6)])
    assert drain(frontier, overflow) == [f"http://a.test/new{n}" for n in range(6)]


def test_a_node_that_heard_nothing_for_a_while_takes_no_live_nodes_journal(
    overflow_setup, redis_client
):
    """After a silence of its own (Redis stalled, its thread starved) a node judges
    no other dead by a silence it could not have heard: the others' spill journals
    wait until it has heard Redis again, and are written once their nodes are dead."""
    frontier, other = overflow_setup(node="other", queue_max=2)
    keys = frontier.keys
    frontier.enqueue([entry(f"http://a.test/{n}") for n in range(8)])
    assert len(take_spill_batch(other, keys, "other")) == 6  # its journal
    _, peer = overflow_setup(node="peer", queue_max=2)
    now = time.time()
    redis_client.zadd(keys.nodes, {"other": int((now - 40) * 1000)})  # silent for 40 s
    peer._heard = now - 35  # and the peer heard nothing for 35 s: it cannot tell
    peer.turn_done(peer.turn())
    assert redis_client.llen(keys.named("spilling", node="other")) == 6
    assert peer.store.waiting_count() == 0

    peer._last_recover = 0.0  # the next recovery, now that the peer hears Redis
    peer.turn_done(peer.turn())
    assert not redis_client.exists(keys.named("spilling", node="other"))
    assert peer.store.waiting_count() == 6
