"""The Redis frontier at the unit level, against a real Redis."""

import hashlib
import json

import pytest

from extensions.frontier.frontier import Frontier, SentFingerprints, now_ms
from extensions.keys import SpiderKeys


def entry(url: str, priority: int = 0, fingerprint: bytes | str | None = None):
    data = {"url": url}
    if priority:
        data["priority"] = priority
    fp = hashlib.sha1(url.encode()).digest() if fingerprint is None else fingerprint
    return (fp, -priority, json.dumps(data).encode())


@pytest.fixture
def keys():
    return SpiderKeys.for_spider("t")


def test_enqueue_skips_seen_fingerprints(redis_client, keys):
    frontier = Frontier(redis_client, keys, "n1")
    assert frontier.enqueue([entry("http://a/1"), entry("http://a/2"), entry("http://a/1")]) == 2
    assert frontier.enqueue([entry("http://a/2"), entry("http://a/3")]) == 1
    sizes = frontier.sizes()
    assert (sizes.queued, sizes.seen) == (3, 3)


def test_dont_filter_skips_the_seen_check(redis_client, keys):
    frontier = Frontier(redis_client, keys, "n1")
    frontier.enqueue([entry("http://a/1")])
    assert frontier.enqueue([entry("http://a/1?again", fingerprint="")]) == 1
    assert frontier.sizes().seen == 1


def test_lease_moves_best_priority_first_and_keeps_it_leased(redis_client, keys):
    frontier = Frontier(redis_client, keys, "n1")
    frontier.enqueue([entry("http://a/low"), entry("http://a/high", priority=5)])
    leased, _ = frontier.lease(1, lease_timeout=60)
    assert json.loads(leased[0])["url"] == "http://a/high"
    sizes = frontier.sizes()
    assert (sizes.queued, sizes.in_flight) == (1, 1)
    assert redis_client.zscore(keys.nodes, "n1") is not None

    frontier.release(leased)
    assert frontier.sizes().in_flight == 0


def test_dead_nodes_leases_return_to_the_queue_with_their_priority(redis_client, keys):
    dead = Frontier(redis_client, keys, "dead")
    alive = Frontier(redis_client, keys, "alive")
    dead.enqueue([entry("http://a/1", priority=3), entry("http://a/2")])
    dead.lease(2, lease_timeout=600)
    redis_client.rpush(keys.start_leases("dead"), b"http://a/start")  # taken, not yet queued
    alive.heartbeat()
    assert not alive.reclaim(node_timeout=30)  # "dead" beat just now
    redis_client.zadd(keys.nodes, {"dead": now_ms() - 60_000})

    returned = alive.reclaim(node_timeout=30)
    assert (returned.requests, returned.start_urls) == ({"dead": 2}, {"dead": 1})
    assert redis_client.lrange(keys.start_urls, 0, -1) == [b"http://a/start"]
    sizes = alive.sizes()
    assert (sizes.queued, sizes.in_flight, sizes.start_urls) == (2, 0, 1)
    first, _ = alive.lease(1, lease_timeout=60)
    assert json.loads(first[0])["url"] == "http://a/1"  # priority 3 kept


def test_expired_leases_of_a_live_node_return(redis_client, keys):
    frontier = Frontier(redis_client, keys, "n1")
    frontier.enqueue([entry("http://a/1")])
    frontier.lease(1, lease_timeout=-1)  # already past its deadline
    assert frontier.reclaim(node_timeout=30).requests == {"n1": 1}
    assert frontier.sizes().queued == 1


def test_closing_node_hands_back_everything(redis_client, keys):
    frontier = Frontier(redis_client, keys, "n1")
    frontier.enqueue([entry(f"http://a/{i}") for i in range(5)])
    frontier.lease(3, lease_timeout=600)
    assert frontier.reclaim(node_timeout=30, closing_node="n1").requests == {"n1": 3}
    assert frontier.sizes().queued == 5


def test_state_survives_a_new_frontier_object(redis_client, keys):
    """A restarted node (a new Frontier on the same Redis) sees the same crawl."""
    first = Frontier(redis_client, keys, "n1")
    first.enqueue([entry(f"http://a/{i}") for i in range(4)])
    first.lease(1, lease_timeout=600)
    again = Frontier(redis_client, keys, "n2")
    sizes = again.sizes()
    assert (sizes.queued, sizes.in_flight, sizes.seen) == (3, 1, 4)
    assert again.enqueue([entry("http://a/0")]) == 0


def test_clear_keeps_start_urls_and_dead_letters(redis_client, keys):
    frontier = Frontier(redis_client, keys, "n1")
    frontier.enqueue([entry("http://a/1")])
    frontier.lease(1, lease_timeout=600)
    redis_client.lpush(keys.start_urls, "http://a/")
    redis_client.lpush(keys.dlq, "{}")
    frontier.clear()
    sizes = frontier.sizes()
    assert (sizes.queued, sizes.in_flight, sizes.seen) == (0, 0, 0)
    assert (sizes.start_urls, sizes.dlq) == (1, 1)


def test_an_idle_lease_says_when_the_next_retry_is_due(redis_client, keys):
    frontier = Frontier(redis_client, keys, "n1")
    assert frontier.lease(4, lease_timeout=60) == ([], None)
    frontier.delay([(2_000_000_000.5, b'{"url":"http://a/later"}')])
    assert frontier.lease(4, lease_timeout=60) == ([], 2_000_000_000.5)
    frontier.delay([(1.0, b'{"url":"http://a/due"}')])
    items, _ = frontier.lease(4, lease_timeout=60)
    assert items == [b'{"url":"http://a/due"}']


def test_exact_dupefilter_never_confuses_fingerprints_sharing_a_bucket(redis_client, keys):
    """Fingerprints in one bucket, and a tail that spans two stored ones, stay distinct."""
    frontier = Frontier(redis_client, keys, "n1")
    first, second = b"AB" + b"x" * 6 + b"y" * 6, b"AB" + b"y" * 6 + b"z" * 6
    spanning = b"AB" + b"y" * 12  # the end of one stored tail and the start of the next
    padding = b"\0" * 6  # Scrapy's fingerprints are longer than what is kept
    assert frontier.enqueue([(fp + padding, 0, fp) for fp in (first, second)]) == 2
    assert frontier.enqueue([(spanning + padding, 0, spanning)]) == 1
    assert frontier.enqueue([(fp + padding, 0, b"again") for fp in (first, second, spanning)]) == 0
    assert frontier.sizes().seen == 3


def test_nodes_silent_for_long_are_forgotten_once_their_leases_are_back(redis_client, keys):
    frontier = Frontier(redis_client, keys, "alive")
    frontier.heartbeat()
    redis_client.zadd(keys.nodes, {"recent": now_ms() - 60_000, "ancient": now_ms() - 3_600_000})
    redis_client.hset(keys.node("ancient"), "pages", 1)
    redis_client.zadd(keys.leases("ancient"), {b'{"url":"http://a/x"}': 1e15})
    assert frontier.reclaim(node_timeout=30, forget_after=600).requests == {"ancient": 1}
    assert {n.decode() for n in redis_client.zrange(keys.nodes, 0, -1)} == {"alive", "recent"}
    assert not redis_client.exists(keys.node("ancient"))
    assert frontier.sizes().queued == 1


def test_sent_fingerprints_forget_only_a_whole_old_generation():
    sent = SentFingerprints(2)
    assert sent.add(b"a") and sent.add(b"b")
    assert not sent.add(b"a")
    assert sent.add(b"c")  # a full generation {a, b} becomes the previous one
    assert not sent.add(b"a") and not sent.add(b"c")
    assert sent.add(b"d")
    assert sent.add(b"e")  # {c, d} is previous now: a and b are forgotten
    assert sent.add(b"a")  # sent again; the shared dupefilter drops it
    sent.clear()
    assert sent.add(b"c")
    off = SentFingerprints(0)
    assert off.add(b"a") and off.add(b"a")
