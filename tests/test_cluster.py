"""Crawls on a Redis Cluster of three primaries (``REDIS_CLUSTER=True``)."""

import json

from extensions.keys import SpiderKeys
from tests.conftest import scrapy
from tests.helpers import FLAKY_SETTINGS, SHOP_PAGES, all_keys, assert_shop_crawled_once, page_hits


def test_two_nodes_crawl_the_shop_with_the_frontier_spread_over_the_cluster_by_default(
    redis_cluster, cluster_client, demo_site, nodes, tmp_path
):
    """FRONTIER_SHARDS = "auto": 32 shards per primary, recorded by the first node."""
    cluster = ("-s", f"REDIS_URL={redis_cluster.url}", "-s", "REDIS_CLUSTER=True")
    seeded = scrapy("seed", "shop", demo_site.url + "/", *cluster)
    assert seeded.returncode == 0, seeded.stderr
    assert "{shop}:start_urls" in seeded.stdout
    for node in ("n1", "n2"):
        nodes.start("shop", redis_cluster.url, REDIS_CLUSTER=True, NODE_ID=node,
                    MAX_IDLE_TIME_BEFORE_CLOSE=2)  # fmt: skip
    assert nodes.wait(240) == [0, 0], nodes.tail()

    items = assert_shop_crawled_once(demo_site, tmp_path / "items")
    assert {item["_node"] for item in items} == {"n1", "n2"}

    assert cluster_client.get("{shop}:shards") == b"96"
    keys = all_keys(cluster_client)
    assert "{shop}:checkpoint" in keys and "{shop}:nodes" in keys  # what users look at
    shard = SpiderKeys.for_spider("shop", hash_tag=True, shards=96).shard_of("127.0.0.1")
    assert f"{{shop:{shard}}}:dupefilter" in keys  # the host's dedupe in its shard
    assert all(key.startswith(("{shop}:", "{shop:")) for key in keys), keys

    status = scrapy("status", "shop", "--json", *cluster)
    assert status.returncode == 0, status.stderr
    report = json.loads(status.stdout)
    assert report["done"] == report["seen"] == len(SHOP_PAGES)
    assert report["queued"] == report["in_flight"] == 0


def test_retries_dead_letters_bloom_and_politeness_on_a_cluster(
    redis_cluster, cluster_client, demo_site, nodes
):
    cluster_client.lpush("{site}:start_urls", demo_site.url + "/flaky/")
    nodes.start("site", redis_cluster.url, spider_args={"allow": "/flaky/"},
                REDIS_CLUSTER=True, DUPEFILTER_MODE="bloom",
                FRONTIER_SHARDS=1, CLUSTER_HOST_RATE=1000, **FLAKY_SETTINGS)  # fmt: skip
    assert nodes.wait(120) == [0], nodes.tail()

    hits = page_hits(demo_site)
    for n in (1, 2, 3):
        assert hits[f"/flaky/503-twice/{n}"] == 3
        assert hits[f"/flaky/500/{n}"] == 3
    keys = all_keys(cluster_client)
    assert any(key.startswith("{site}:bloom:") for key in keys)
    assert "{site}:rates" in keys and "{site}:host:127.0.0.1" in keys  # politeness state
    # FRONTIER_SHARDS=1: every key of the spider in one slot, as before shards
    assert "{site}:shards" not in keys and all(key.startswith("{site}:") for key in keys)
    assert len({cluster_client.keyslot(key) for key in keys}) == 1

    listed = scrapy("dlq", "site", "list", "--json", "-s", f"REDIS_URL={redis_cluster.url}",
                    "-s", "REDIS_CLUSTER=True")  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    urls = sorted(json.loads(line)["url"] for line in listed.stdout.splitlines())
    assert urls == [f"{demo_site.url}/flaky/500/{n}" for n in (1, 2, 3)]


def test_a_cluster_node_without_redis_cluster_is_refused_with_what_to_do(
    redis_cluster, redis_url, demo_site
):
    result = scrapy("crawl", "shop", "-s", f"REDIS_URL={redis_cluster.url}")
    assert result.returncode == 1
    assert "is a Redis Cluster node: set REDIS_CLUSTER=True" in result.stderr
    assert "Traceback" not in result.stderr

    # and the other way round: a single Redis with REDIS_CLUSTER on
    result = scrapy("crawl", "shop", "-s", f"REDIS_URL={redis_url}", "-s", "REDIS_CLUSTER=True")
    assert result.returncode == 1
    assert "is not a cluster node" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_start_url_key_outside_the_spiders_slot_is_refused(redis_cluster):
    result = scrapy("seed", "shop", "http://example.com/", "-s", f"REDIS_URL={redis_cluster.url}",
                    "-s", "REDIS_CLUSTER=True", "-s", "REDIS_START_URLS_KEY=seeds")  # fmt: skip
    assert result.returncode != 0
    assert "must contain %(name)s" in result.stderr
    result = scrapy("crawl", "shop", "-s", f"REDIS_URL={redis_cluster.url}",
                    "-s", "REDIS_CLUSTER=True", "-s", "REDIS_START_URLS_KEY=seeds")  # fmt: skip
    assert result.returncode == 1
    assert "must contain %(name)s" in result.stderr
    assert "Traceback" not in result.stderr


def test_cluster_pipelines_queue_scripts_as_eval(redis_cluster, cluster_client):
    """A transaction holding a script works on a cluster (redis-py refuses EVALSHA
    there) and still succeeds after the node forgot its scripts."""
    from extensions import connection
    from extensions.frontier.frontier import Frontier
    from extensions.frontier.results import Added
    from extensions.keys import SpiderKeys

    client = connection.connect(redis_cluster.url, cluster=True)
    frontier = Frontier(client, SpiderKeys.for_spider("t", hash_tag=True), "n1")
    cluster_client.script_flush()
    pipe = client.pipeline(transaction=True)
    frontier.enqueue_on(pipe, [(b"f" * 20, "a", 0, b'{"url":"http://a/"}')])
    frontier.heartbeat(pipe)
    # new, none over a host budget or a crawl budget
    assert Added.of(pipe.execute()[0]) == Added(1, (), 0)
    assert cluster_client.zcard("{t}:queue:a") == 1
    assert cluster_client.zscore("{t}:nodes", "n1")
