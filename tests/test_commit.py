"""The frontier's write as a value: the lease guarantee (``phases``), checked
for every write there can be; and ``commit`` against a real Redis, without Scrapy."""

from __future__ import annotations

import itertools
import json

import pytest

from extensions.frontier.commit import AFTER, WRITES, FrontierWrite, commit, phases
from extensions.frontier.frontier import Frontier
from extensions.keys import SpiderKeys

SAMPLES = {
    "enqueue": [("", "a", 0, b"{}")],
    "delay": [(1.0, "a", b"{}")],
    "release": [b"a\n1"],
    "start_acks": [b"http://a/"],
    "done": 1,
    "lease": 4,
}


def _writes() -> list[FrontierWrite]:
    parts = list(SAMPLES)
    return [
        FrontierWrite(**{part: SAMPLES[part] for part in chosen})
        for size in range(len(parts) + 1)
        for chosen in itertools.combinations(parts, size)
    ]


@pytest.mark.parametrize("sharded", [False, True])
def test_no_release_goes_before_the_writes_of_its_flush(sharded):
    for write in _writes():
        trips = phases(write, sharded)
        wanted = [p for p in (*WRITES, *AFTER) if write.has(p)]
        assert sorted(p for trip in trips for p in trip) == sorted(wanted)  # each part once
        if not sharded:
            assert len(trips) <= 1  # one transaction: all of it or none of it
            continue
        writes_at = [i for i, trip in enumerate(trips) if set(trip) & set(WRITES)]
        after_at = [i for i, trip in enumerate(trips) if set(trip) & set(AFTER)]
        if writes_at and after_at:
            assert max(writes_at) < min(after_at), trips


def _leased(frontier: Frontier, url: str) -> bytes:
    frontier.enqueue([(url.encode().ljust(20, b"-"), "a", 0, json.dumps({"url": url}).encode())])
    for _ in range(frontier.keys.shards):  # a sharded lease looks through the shards in turn
        leased, _ = frontier.lease(1, 600)
        if leased:
            return leased[0].member
    raise AssertionError(f"{url} was not leased")


def test_commit_writes_children_and_releases_their_parent_together(redis_client):
    keys = SpiderKeys.for_spider("c")
    frontier = Frontier(redis_client, keys, "n1")
    parent = _leased(frontier, "http://a/parent")
    child = (b"child".ljust(20, b"-"), "a", 0, b'{"url":"http://a/child"}')
    write = FrontierWrite(enqueue=[child], release=[parent], done=1, lease=1)
    result = commit(frontier, write, 600)
    assert (result.writes_in, result.rest_in, result.error) == (True, True, None)
    assert result.added is not None and result.added.new == 1
    assert result.leased is not None and [json.loads(x.data)["url"] for x in result.leased[0]] == [
        "http://a/child"
    ]
    assert redis_client.zrange(keys.leases("n1"), 0, -1) == [result.leased[0][0].member]
    assert int(redis_client.hget(keys.checkpoint, "done")) == 1


def test_a_refused_write_keeps_the_release_back_unless_the_rest_went_in(redis_client):
    """One slot: Redis refusing an entry is the entry's fault; the transaction ran
    the rest, the refused write is done again alone (rest_in, bad_input). Redis
    away: nothing went in, and the lease stays until the next flush."""
    keys = SpiderKeys.for_spider("c")
    frontier = Frontier(redis_client, keys, "n1")
    parent = _leased(frontier, "http://a/parent")
    bad = ("", "a", "not a number", b'{"url":"http://a/nan"}')
    result = commit(frontier, FrontierWrite(enqueue=[bad], release=[parent]), 600)
    assert (result.writes_in, result.rest_in, result.bad_input) == (False, True, True)
    assert redis_client.zcard(keys.leases("n1")) == 0

    gone = Frontier(type(redis_client)(port=1, socket_connect_timeout=0.2), keys, "n1")
    result = commit(gone, FrontierWrite(release=[b"a\n9"]), 600)
    assert (result.writes_in, result.rest_in, result.bad_input) == (False, False, False)
    assert result.error is not None


def test_a_sharded_write_stays_with_the_node_until_the_release_after_it_is_in(redis_client):
    """Sharded, the writes and the release go in two round trips. When the second
    fails (here the crawl's checkpoint is not a hash; in life a primary failing
    over between them, which may lose what it acknowledged), the writes are not
    settled: written again with the release, the dupefilter keeps them single."""
    keys = SpiderKeys.for_spider("c", shards=2)
    frontier = Frontier(redis_client, keys, "n1")
    parent = _leased(frontier, "http://a/parent")
    child = (b"child".ljust(20, b"-"), "a", 0, b'{"url":"http://a/child"}')
    write = FrontierWrite(enqueue=[child], release=[parent], done=1)
    redis_client.rpush(keys.checkpoint, "not a hash")
    result = commit(frontier, write, 600)
    assert (result.writes_in, result.rest_in, result.writes_settled) == (True, False, False)
    assert result.error is not None

    redis_client.delete(keys.checkpoint)
    again = commit(frontier, write, 600)
    assert (again.writes_in, again.rest_in, again.writes_settled) == (True, True, True)
    assert again.added is not None and again.added.new == 0  # already queued: filtered
    queued_urls = [
        json.loads(raw)["url"]
        for shard in keys.all_shards()
        for raw in redis_client.hvals(shard.data("a"))
    ]
    assert queued_urls == ["http://a/child"]  # queued once; the parent's data went with it
    assert int(redis_client.hget(keys.checkpoint, "done")) == 1

    one_slot = commit(Frontier(redis_client, SpiderKeys.for_spider("d"), "n1"), write, 600)
    assert one_slot.writes_settled  # one transaction: nothing to write again


def test_a_sharded_write_settles_when_redis_refuses_the_rest_for_what_it_holds(redis_client):
    """A release Redis refuses for its input (here a done count that is not a
    number) says the primary is up and holds the writes: they are not sent again."""
    keys = SpiderKeys.for_spider("e", shards=2)
    frontier = Frontier(redis_client, keys, "n1")
    parent = _leased(frontier, "http://a/parent")
    child = (b"child".ljust(20, b"-"), "a", 0, b'{"url":"http://a/child"}')
    redis_client.hset(keys.checkpoint, "done", "not a number")
    result = commit(frontier, FrontierWrite(enqueue=[child], release=[parent], done=1), 600)
    assert (result.writes_in, result.rest_in, result.bad_input) == (True, False, True)
    assert result.writes_settled
