"""The Redis dupefilter on its own, as used with Scrapy's default scheduler."""

import hashlib

import pytest
from scrapy import Request
from scrapy.utils.request import RequestFingerprinter

from extensions.frontier.dupefilter import RedisDupeFilter
from extensions.frontier.frontier import Frontier
from extensions.frontier.upkeep import Upkeep
from extensions.keys import SpiderKeys
from servers import services
from servers.clients import redis_at


def test_request_seen_uses_scrapys_fingerprints(redis_client):
    dupefilter = RedisDupeFilter(redis_client, "t:dupefilter", RequestFingerprinter())
    assert dupefilter.request_seen(Request("https://example.com/a?x=1&y=2")) is False
    # Scrapy's fingerprinter canonicalises the URL: same request, another spelling.
    assert dupefilter.request_seen(Request("https://example.com/a?y=2&x=1")) is True
    assert dupefilter.request_seen(Request("https://example.com/b")) is False
    assert int(redis_client.hget("t:dupefilter", "n")) == 2


def fingerprints(start: int, count: int) -> list[bytes]:
    return [hashlib.sha1(b"url-%d" % i).digest() for i in range(start, start + count)]


def record(frontier: Frontier, fps: list[bytes]) -> int:
    return frontier.enqueue([(fp, "", 0, b"") for fp in fps]).new


@pytest.mark.spawns  # its own Redis
def test_the_exact_filter_grows_by_levels_and_each_new_url_writes_the_same(tmp_path):
    """Past the first level's capacity (368,640), new fingerprints go to the next
    level; a bucket stays a compact listpack; what the AOF receives per new URL
    does not grow with the filter."""
    server = services.start_redis(
        tmp_path, appendonly=True, extra_args=("--auto-aof-rewrite-percentage", "0")
    )
    client = redis_at(server.url)
    try:
        frontier = Frontier(client, SpiderKeys.for_spider("g"), "n1")

        def aof_per_new_url(start: int) -> float:
            before = int(client.info("persistence")["aof_current_size"])
            assert record(frontier, fingerprints(start, 2000)) == 2000
            return (int(client.info("persistence")["aof_current_size"]) - before) / 2000

        early = aof_per_new_url(0)
        for start in range(2000, 400_000, 20_000):
            record(frontier, fingerprints(start, min(20_000, 400_000 - start)))
        late = aof_per_new_url(400_000)
        assert late <= early * 1.1, (early, late)
        assert early <= 100
        assert client.hget("g:dupefilter", "n") == b"402000"
        assert record(frontier, fingerprints(0, 402_000)[::1000]) == 0  # all still seen
        level_zero = client.keys("g:dupefilter:0:*")
        level_one = client.keys("g:dupefilter:1:*")
        assert len(level_zero) == 4096 and level_one
        biggest = max(client.hlen(key) for key in level_zero[:200])
        assert biggest <= 128
        assert client.object("encoding", level_zero[0]) in (b"ziplist", b"listpack")
    finally:
        client.close()
        server.stop()


def test_a_dupefilter_written_before_levels_is_upgraded_into_them(redis_client):
    keys = SpiderKeys.for_spider("old")
    old = fingerprints(0, 3)
    # the earlier layout: 2-byte bucket -> 12-byte tails side by side, 'n' = count
    for fp in old:
        redis_client.hset("old:dupefilter", fp[:2], fp[2:14])
    redis_client.hset("old:dupefilter", "n", 3)
    frontier = Frontier(redis_client, keys, "n1")
    assert Upkeep(frontier).upgrade(lambda stored: "")["fingerprints"] == 3
    assert redis_client.hlen("old:dupefilter") == 1  # 'n' alone: the old buckets are gone
    assert record(frontier, old) == 0  # still seen, from the levels
    assert record(frontier, fingerprints(3, 2)) == 2
    assert redis_client.hget("old:dupefilter", "n") == b"5"
