"""A sharded crawl on a Redis Cluster with replicas: a node killed and a primary
failing over mid-crawl lose no page and double no item."""

import json
import signal

import pytest

from extensions.keys import SpiderKeys
from servers import services
from servers.clients import cluster_at, redis_at
from servers.redis_cluster import start_redis_cluster
from tests.conftest import site_hits
from tests.helpers import all_keys, wait_for


@pytest.fixture
def replicated_cluster(tmp_path):
    """Three primaries with a replica each, promoted 1 s after its primary goes."""
    cluster = start_redis_cluster(tmp_path / "cluster", replicas=True, node_timeout_ms=1000)
    yield cluster
    cluster.stop()


@pytest.mark.chaos
def test_a_node_killed_and_a_primary_failing_over_mid_crawl_lose_no_page_and_double_no_item(
    replicated_cluster, mongo_db, nodes
):
    """Two hosts in their shards on a three-primary cluster with replicas, the
    Bloom dupefilter, one host rate-limited, retries and dead letters: one of
    three nodes is killed (-9), then the primary holding a host's shard (-9);
    its replica is promoted, and the nodes ride through the errors and the
    moved slots."""
    from tests.helpers import ALLOW, HOPELESS, good_pages
    from tests.helpers import CHAOS_SETTINGS as SETTINGS

    site = services.start_demo_site(latency=0.1)
    client = cluster_at(replicated_cluster.url)
    try:
        mongo_uri, database, db = mongo_db
        other = site.url.replace("127.0.0.1", "localhost")
        keys = SpiderKeys.for_spider("site", hash_tag=True, shards=4)
        assert keys.shard_of("127.0.0.1") != keys.shard_of("localhost")
        # A lease Redis took while the node never heard the answer (the primary
        # died in between) goes back at the node's next heartbeat (lostleases.py),
        # not after FRONTIER_LEASE_TIMEOUT (10 min): the project's defaults
        settings = {**SETTINGS, "MONGO_URI": mongo_uri, "MONGO_DATABASE": database,
                    "REDIS_CLUSTER": True, "FRONTIER_SHARDS": 4, "DUPEFILTER_MODE": "bloom",
                    "CLUSTER_HOST_RATES": json.dumps({"localhost": 20})}  # fmt: skip
        client.lpush(keys.start_urls, site.url + "/category/books", other + "/flaky/")
        for n in (1, 2, 3):
            nodes.start("site", replicated_cluster.url, spider_args={"allow": ALLOW},
                        NODE_ID=f"n{n}", **settings)  # fmt: skip
        wait_for(lambda: sum(site_hits(site).values()) >= 30, 60, "crawl start")
        # every node in the crawl before anything dies (a loaded machine starts the
        # third late, and a node opening into a failover is another scenario)
        wait_for(lambda: client.zcard(keys.nodes) >= 3, 60, "all three nodes joined")
        nodes.procs[1].send_signal(signal.SIGKILL)
        nodes.procs[1].wait(10)

        holder = client.get_node_from_key(keys.shard(keys.shard_of("127.0.0.1")).ready)
        primary = next(n for n in replicated_cluster.nodes if n.url.endswith(f":{holder.port}/0"))
        index = replicated_cluster.nodes.index(primary)
        primary.proc.kill()  # no chance to write anything out
        primary.proc.wait(10)
        hits_at_failover = sum(site_hits(site).values())
        replica = redis_at(replicated_cluster.replicas[index].url)
        wait_for(
            lambda: replica.info("replication")["role"] == "master", 30, "the replica promoted"
        )
        replica.close()

        assert nodes.wait(240) == [0, -signal.SIGKILL, 0], nodes.tail()
        assert sum(site_hits(site).values()) > hits_at_failover, "the crawl ended before it"

        def path(url: str) -> str:
            return url.removeprefix(site.url).removeprefix(other)

        stored = [path(doc["url"]) for doc in db["site"].find({}, {"url": 1})]
        assert len(stored) == len(set(stored)), "a page was stored twice"
        assert set(stored) == good_pages(), f"lost: {good_pages() - set(stored)}"
        letters = [json.loads(raw) for raw in client.lrange(keys.dlq, 0, -1)]
        assert {letter["url"] for letter in letters} == {other + page for page in HOPELESS}
        assert all(client.zcard(s.delayed) == 0 for s in keys.all_shards())
        assert not [k for k in all_keys(client) if k.startswith("{site}:queue:")]
    finally:
        client.close()
        site.stop()
