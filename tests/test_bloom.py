"""The Bloom-filter dupefilter: sizing, false-positive rate, and a real crawl."""

import hashlib

import pytest

from extensions.frontier.bloom import MAX_SHARD_BITS, BloomParams
from extensions.frontier.frontier import Frontier
from extensions.keys import SpiderKeys
from tests.conftest import read_items
from tests.helpers import ALLOW, good_pages


def test_sizing_follows_the_error_rate():
    params = BloomParams.for_capacity(1_000_000, 0.001)
    assert params.hashes == 10
    assert 1.7 < params.bytes_per_entry < 1.9  # the 2 bytes per URL target
    big = BloomParams.for_capacity(10_000_000_000, 0.001)
    assert big.shards > 1 and big.shard_bits <= MAX_SHARD_BITS
    with pytest.raises(ValueError):
        BloomParams.for_capacity(100, 1.5)


def fingerprints(start: int, count: int) -> list[bytes]:
    return [hashlib.sha1(f"url-{i}".encode()).digest()[:16] for i in range(start, start + count)]


FILLED = 50_000  # the false-positive rate of a filter sized for n depends on the fill, not on n


def test_false_positive_rate_within_bound_when_filled_to_capacity(redis_client):
    params = BloomParams.for_capacity(FILLED, 0.001)
    frontier = Frontier(redis_client, SpiderKeys.for_spider("bf"), "n1", params)
    inserted = 0
    for start in range(0, FILLED, 2_000):  # a script call well inside the client's timeout
        batch = [(fp, "g", 0, b"") for fp in fingerprints(start, 2_000)]
        inserted += frontier.enqueue(batch).new  # a few collide already while it fills
    assert FILLED - inserted <= FILLED * 0.001
    assert frontier.sizes().seen == inserted
    # URLs never seen, asked of the bitmaps in Redis without adding them (adding
    # them would fill the filter past its capacity as the probe goes on)
    probes = 100_000
    pipe = redis_client.pipeline(transaction=False)
    for fp in fingerprints(2_000_000, probes):
        shard, offsets = params.positions(fp)
        reads = [arg for offset in offsets for arg in ("GET", "u1", offset)]
        pipe.execute_command("BITFIELD", f"bf:bloom:{shard}", *reads)
    false_positives = sum(all(bits) for bits in pipe.execute())
    assert false_positives / probes <= 0.001 * 1.5, false_positives / probes
    assert frontier.enqueue([(fp, "g", 0, b"z") for fp in fingerprints(0, 1000)]).new == 0


def test_a_filter_for_one_million_urls_takes_under_two_bytes_each(redis_client):
    params = BloomParams.for_capacity(1_000_000, 0.001)
    frontier = Frontier(redis_client, SpiderKeys.for_spider("bf"), "n1", params)
    frontier.enqueue([(fp, "g", 0, b"") for fp in fingerprints(0, 1000)])
    shards = [f"bf:bloom:{n}" for n in range(params.shards)]
    # the bitmaps are made at their full size up front: filling them adds nothing
    assert sum(redis_client.strlen(key) for key in shards) / 1_000_000 <= 2.0
    # What Redis allocates adds the allocator's rounding to a size class.
    assert sum(redis_client.memory_usage(key) for key in shards) / 1_000_000 <= 2.4


def test_a_crawl_with_the_bloom_dupefilter(redis_url, redis_client, demo_site, nodes, tmp_path):
    redis_client.lpush("site:start_urls", demo_site.url + "/category/books")
    nodes.start("site", redis_url, spider_args={"allow": ALLOW}, MAX_IDLE_TIME_BEFORE_CLOSE=1,
                DUPEFILTER_MODE="bloom", DUPEFILTER_BLOOM_CAPACITY=100_000)  # fmt: skip
    assert nodes.wait(60) == [0], nodes.tail()
    stored = [i["url"].removeprefix(demo_site.url) for i in read_items(tmp_path / "items")]
    assert sorted(stored) == sorted(p for p in good_pages() if not p.startswith("/flaky/"))
    assert not redis_client.exists("site:dupefilter")
    assert int(redis_client.get("site:bloom:count")) == len(stored)
