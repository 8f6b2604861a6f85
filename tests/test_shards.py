"""FRONTIER_SHARDS: one crawl's frontier split by host into shards, each under a
hash tag of its own ({NAME:K}), on one Redis and on a Redis Cluster."""

import hashlib
import json

import pytest
from redis.cluster import RedisCluster

from extensions import connection, sharding
from extensions import shardcount as shard_keys
from extensions.frontier.frontier import Frontier, now_ms
from extensions.frontier.groups import group_for
from extensions.frontier.redisops import execute
from extensions.frontier.results import Added
from extensions.frontier.upkeep import Upkeep
from extensions.keys import SpiderKeys
from servers import services
from tests.conftest import read_items, scrapy, site_hits
from tests.helpers import all_keys, stack_settings

HOSTS = [f"host{n}.example" for n in range(24)]


def entry(url: str, priority: int = 0) -> tuple:
    data = json.dumps({"url": url, **({"priority": priority} if priority else {})}).encode()
    return (hashlib.sha1(url.encode()).digest(), group_for(url), priority, data)


def test_shard_keys_carry_their_own_hash_tag_and_one_shard_is_the_crawl_as_before():
    whole = SpiderKeys.for_spider("shop")
    assert whole.shard(0) is whole and whole.shard_of("a.example") == 0
    keys = SpiderKeys.for_spider("shop", shards=4)
    second = keys.shard(1)
    assert second.queue("a.example") == "{shop:1}:queue:a.example"
    assert second.data("a.example") == "{shop:1}:data:a.example"
    assert (second.ready, second.leases("n1"), second.dupefilter) == (
        "{shop:1}:ready", "{shop:1}:leases:n1", "{shop:1}:dupefilter"
    )  # fmt: skip
    assert second.name == "shop"
    # what users look at stays where it was
    assert (keys.start_urls, keys.dlq, keys.checkpoint, keys.nodes) == (
        "shop:start_urls", "shop:dlq", "shop:checkpoint", "shop:nodes"
    )  # fmt: skip
    # a host's shard is a stable hash of it, the same on every node
    assert {keys.shard_of(host) for host in HOSTS} == {0, 1, 2, 3}
    assert [keys.shard_of(h) for h in HOSTS] == [keys.shard_of(h) for h in HOSTS]
    with pytest.raises(ValueError, match="FRONTIER_SHARDS"):
        SpiderKeys.for_spider("shop", shards=0)


def test_a_sharded_frontier_queues_leases_releases_and_hands_back_across_shards(redis_client):
    keys = SpiderKeys.for_spider("t", shards=3)
    frontier = Frontier(redis_client, keys, "n1")
    urls = [f"http://{host}/{n}" for host in HOSTS for n in range(2)]
    assert frontier.enqueue([entry(u) for u in urls]).new == len(urls)
    assert frontier.enqueue([entry(u) for u in urls[:5]]).new == 0  # seen, in their shards
    for host in HOSTS:
        shard = keys.shard(keys.shard_of(host))
        assert redis_client.zcard(shard.queue(host)) == 2
    assert not list(redis_client.scan_iter("t:queue:*"))  # nothing in the unsharded layout
    sizes = frontier.sizes()
    assert (sizes.queued, sizes.seen, sizes.hosts) == (len(urls), len(urls), len(HOSTS))

    leased, _ = frontier.lease(30, lease_timeout=600)
    assert len(leased) >= 30 and len({lease.member.split(b"\n")[0] for lease in leased}) > 3
    assert frontier.sizes().in_flight == len(leased)
    done, kept = leased[:10], leased[10:]
    frontier.release([lease.member for lease in done])
    assert frontier.sizes().in_flight == len(kept)

    # the node dies: every shard hands its leases back
    redis_client.zadd(keys.nodes, {"n1": now_ms() - 60_000})
    for shard in keys.all_shards():
        redis_client.zadd(shard.nodes, {"n1": now_ms() - 60_000})
    other = Frontier(redis_client, keys, "n2")
    assert other.reclaim(node_timeout=30).requests == {"n1": len(kept)}
    sizes = other.sizes()
    assert (sizes.queued, sizes.in_flight) == (len(urls) - 10, 0)
    back = {json.loads(lease.data)["url"] for lease in other.lease(100, lease_timeout=600)[0]}
    assert back == set(urls) - {json.loads(lease.data)["url"] for lease in done}

    other.delay([(1.0, "host3.example", b'{"url":"http://host3.example/later"}')])
    assert redis_client.zcard(keys.shard(keys.shard_of("host3.example")).delayed) == 1
    Upkeep(other).clear()
    assert not [k for k in redis_client.scan_iter("*") if b"{t:" in k]


def test_a_node_heartbeat_reaches_every_shard(redis_client):
    keys = SpiderKeys.for_spider("t", shards=3)
    Frontier(redis_client, keys, "n1").heartbeat()
    for registry in (keys.nodes, *(shard.nodes for shard in keys.all_shards())):
        assert redis_client.zscore(registry, "n1")


def test_changing_the_shard_count_of_a_crawl_is_refused(redis_client):
    whole = SpiderKeys.for_spider("t")
    Frontier(redis_client, whole, "n1").enqueue([entry("http://a.example/")])
    three = SpiderKeys.for_spider("t", shards=3)
    problem = sharding.shards_problem(redis_client, three)
    assert problem and "FRONTIER_SHARDS=1" in problem and "FRONTIER_SHARDS=3" in problem
    assert sharding.shards_problem(redis_client, whole) is None
    redis_client.flushall()
    redis_client.set(three.shards_key, 3)  # as the first node of a 3-shard crawl records it
    assert sharding.shards_problem(redis_client, three) is None
    for other in (whole, SpiderKeys.for_spider("t", shards=2)):
        problem = sharding.shards_problem(redis_client, other)
        assert problem and "set it back to 3" in problem


def _auto_count(client, keys):
    return shard_keys.auto_shards(
        client, keys.shards_key, (keys.frontier, keys.dupefilter, keys.bloom_count)
    )


def test_auto_takes_the_recorded_count_else_one_on_a_single_redis_else_32_per_primary(
    redis_client,
    redis_cluster,
    cluster_client,
):
    auto = SpiderKeys.from_settings("t", stack_settings({"FRONTIER_SHARDS": "auto"}))
    assert auto.auto_shards and sharding.shards_problem(redis_client, auto) is None
    assert _auto_count(redis_client, auto) == 1
    redis_client.set(auto.shards_key, 7)  # a crawl begun with 7: every node adopts it
    assert _auto_count(redis_client, auto) == 7
    assert sharding.shards_problem(redis_client, auto) is None
    assert sharding.as_recorded(redis_client, auto).shards == 7

    client = connection.connect(redis_cluster.url, cluster=True)
    on_cluster = SpiderKeys.from_settings("t", stack_settings({"REDIS_CLUSTER": True}))
    assert on_cluster.auto_shards  # "auto" is the default
    assert (
        shard_keys.auto_shards(
            client,
            on_cluster.shards_key,
            (on_cluster.frontier, on_cluster.dupefilter, on_cluster.bloom_count),
        )
        == 3 * shard_keys.AUTO_SHARDS_PER_PRIMARY
    )
    Frontier(client, on_cluster, "n1").enqueue([entry("http://a.example/")])
    assert (
        shard_keys.auto_shards(
            client,
            on_cluster.shards_key,
            (on_cluster.frontier, on_cluster.dupefilter, on_cluster.bloom_count),
        )
        == 1
    )  # a crawl begun unsharded stays so
    explicit = SpiderKeys.from_settings("t", stack_settings({"REDIS_CLUSTER": True,
                                                       "FRONTIER_SHARDS": 4}))  # fmt: skip
    assert not explicit.auto_shards and sharding.shards_problem(client, explicit)


def test_scrapy_crawl_refuses_another_shard_count_with_one_line(redis_url, redis_client):
    redis_client.set("shop:shards", 4)
    result = scrapy("crawl", "shop", "-s", f"REDIS_URL={redis_url}", "-s", "FRONTIER_SHARDS=2")
    assert result.returncode == 1
    assert "started with FRONTIER_SHARDS=4" in result.stderr
    assert "Traceback" not in result.stderr


def test_two_nodes_crawl_two_hosts_once_on_a_sharded_frontier(
    redis_url, redis_client, nodes, tmp_path
):
    site = services.start_demo_site()
    try:
        # one site under two host names: two queue groups, in different shards
        other = site.url.replace("127.0.0.1", "localhost")
        keys = SpiderKeys.for_spider("site", shards=4)
        assert keys.shard_of("127.0.0.1") != keys.shard_of("localhost")
        redis_client.lpush("site:start_urls", site.url + "/category/books",
                           other + "/category/garden")  # fmt: skip
        for name in ("s1", "s2"):
            nodes.start("site", redis_url, spider_args={"allow": "/category/,/product/"},
                        NODE_ID=name, FRONTIER_SHARDS=4, MAX_IDLE_TIME_BEFORE_CLOSE=2)  # fmt: skip
        assert nodes.wait(240) == [0, 0], nodes.tail()
        hits = site_hits(site)
        assert hits and all(count == 1 for path, count in hits.items() if path != "/robots.txt")
        items = read_items(tmp_path / "items")
        assert len(items) == len({item["url"] for item in items})  # each page stored once
        assert {item["_node"] for item in items} == {"s1", "s2"}
        for host in ("127.0.0.1", "localhost"):  # each host's counters in its own shard
            shard = keys.shard(keys.shard_of(host))
            assert int(redis_client.hget(shard.host(host), "leased") or 0) > 0
        # status reads the crawl with the shard count it recorded, set here or not
        status = scrapy("status", "site", "--json", "-s", f"REDIS_URL={redis_url}")
        assert status.returncode == 0, status.stderr
        report = json.loads(status.stdout)
        assert report["done"] == report["seen"] > len(items) / 2
        assert report["queued"] == report["in_flight"] == 0
        # and one shard at a time: the shards' seen URLs add up to the crawl's
        redis_args = ("-s", f"REDIS_URL={redis_url}")
        seen = 0
        for shard in range(4):
            one = scrapy("status", "site", "--json", "--shard", str(shard), *redis_args)
            assert one.returncode == 0, one.stderr
            part = json.loads(one.stdout)
            assert (part["shard"], part["shards"], part["keys"]) == (
                shard,
                4,
                f"{{site:{shard}}}:*",
            )
            seen += part["seen"]
        assert seen == report["seen"]
        hosts = scrapy("status", "site", "--hosts", "--json", "--shard",
                       str(keys.shard_of("localhost")), *redis_args)  # fmt: skip
        assert [row["host"] for row in json.loads(hosts.stdout)["hosts"]] == ["localhost"]
        wrong = scrapy("status", "site", "--shard", "4", *redis_args)
        assert wrong.returncode != 0 and "--shard must be from 0 to 3" in wrong.stderr
    finally:
        site.stop()


def test_a_sharded_frontier_spreads_one_crawl_over_the_primaries_of_a_cluster(
    redis_cluster,
    cluster_client,
):
    client = connection.connect(redis_cluster.url, cluster=True)
    keys = SpiderKeys.for_spider("t", hash_tag=True, shards=12)
    frontier = Frontier(client, keys, "n1")
    urls = [f"http://{host}/{n}" for host in HOSTS for n in range(3)]
    pipe = client.pipeline(transaction=False)  # as the scheduler writes a sharded frontier
    calls = frontier.enqueue_on(pipe, [entry(u) for u in urls])
    frontier.heartbeat(pipe)
    assert calls == len({keys.shard_of(h) for h in HOSTS})
    assert Added.combine(execute(pipe)[:calls]).new == len(urls)
    sizes = frontier.sizes()
    assert (sizes.queued, sizes.seen) == (len(urls), len(urls))

    shard_keys = [k for k in all_keys(cluster_client) if k.startswith("{t:")]
    for key in shard_keys:  # each shard's keys share one slot, its tag's
        assert cluster_client.keyslot(key) == cluster_client.keyslot(key.split("}")[0] + "}")
    holders = {
        cluster_client.get_node_from_key(key).name for key in shard_keys
    }  # the primaries holding some of the crawl
    assert len(holders) == 3

    leased: list = []
    for _ in range(20):  # each lease asks every shard for its share
        leased += frontier.lease(16, lease_timeout=600)[0]
    assert len(leased) == len(urls)
    pipe = client.pipeline(transaction=False)
    frontier.release([lease.member for lease in leased], pipe)
    execute(pipe)
    sizes = frontier.sizes()
    assert (sizes.queued, sizes.in_flight) == (0, 0)
    Upkeep(frontier).clear()
    assert not [k for k in all_keys(cluster_client) if k.startswith("{t:")]


def test_dead_letters_replay_into_the_shards_the_crawl_recorded(redis_url, redis_client):
    from extensions.frontier.deadletter import DeadLetters

    redis_client.set("shop:shards", 3)  # a 3-shard crawl; this command is not told so
    letters = DeadLetters(redis_client, "shop:dlq", node_id="n1")
    for host in HOSTS[:6]:
        request = json.dumps({"url": f"http://{host}/p", "callback": "parse_product"})
        letters.add(kind="http_error", url=f"http://{host}/p", error="500", request=request)
    result = scrapy("dlq", "shop", "replay", "-s", f"REDIS_URL={redis_url}")
    assert result.returncode == 0, result.stderr
    assert "replayed 6 requests" in result.stdout
    keys = SpiderKeys.for_spider("shop", shards=3)
    for host in HOSTS[:6]:
        assert redis_client.zcard(keys.shard(keys.shard_of(host)).queue(host)) == 1
    assert redis_client.llen("shop:dlq") == 0
    assert Frontier(redis_client, keys, "n").sizes().queued == 6


def test_a_lease_asks_a_moving_window_of_shards_no_more_than_it_wants(redis_client):
    keys = SpiderKeys.for_spider("t", shards=8)
    frontier = Frontier(redis_client, keys, "n1")
    urls = [f"http://{host}/1" for host in HOSTS]
    frontier.enqueue([entry(u) for u in urls])
    leased: list = []
    for _ in range(4 * len(urls)):  # 2 shards asked each time, 1 request from each
        batch, _ = frontier.lease(2, lease_timeout=600)
        assert len(batch) <= 2
        leased += batch
    assert len(leased) == len(urls)  # no shard starved
    fresh = Frontier(redis_client, keys, "n2")
    for _ in range(3):  # three empty windows of two: six of the eight shards seen
        assert fresh.lease(2, lease_timeout=600)[0] == []
        assert not fresh.looked_everywhere
    assert fresh.lease(2, lease_timeout=600)[0] == []
    assert fresh.looked_everywhere


def test_a_lease_asks_the_shards_that_have_work_for_the_bulk_and_looks_into_the_others(
    redis_client,
):
    """One busy host among 32 shards: each lease takes most of what it wants from
    that host's shard, and work another node adds elsewhere is still found."""
    keys = SpiderKeys.for_spider("t", shards=32)
    busy = "busy.example"
    writer = Frontier(redis_client, keys, "writer")
    writer.enqueue([entry(f"http://{busy}/{n}") for n in range(200)])
    node = Frontier(redis_client, keys, "n1")
    first, _ = node.lease(16, lease_timeout=600)  # a fresh node: it sweeps first
    batches = [first]
    for _ in range(6):
        batch, _ = node.lease(16, lease_timeout=600)
        assert len(batch) <= 16
        batches.append(batch)
    assert all(len(batch) >= 14 for batch in batches[2:]), [len(b) for b in batches]
    # another node's work in a shard this node has not seen: found within a cycle
    quiet = next(h for h in HOSTS if keys.shard_of(h) != keys.shard_of(busy))
    writer.enqueue([entry(f"http://{quiet}/1")])
    found = []
    for _ in range(32):
        found += [
            lease.member
            for lease in node.lease(16, lease_timeout=600)[0]
            if quiet.encode() in lease.member
        ]
        if found:
            break
    assert found, "a shard with work was never asked"


def test_a_cluster_pipeline_routes_scripts_by_their_keys_and_runs_those_redis_lost_again(
    redis_cluster,
    cluster_client,
):
    """Outside a transaction scripts go by their hash (EVALSHA); redis-py's
    cluster pipeline would ask the server where each goes (COMMAND GETKEYS, with
    the whole script) and the crawler's client does not. Scripts Redis no longer
    has (a restart, a failover) are loaded and run again, in their place."""
    client = connection.connect(redis_cluster.url, cluster=True)
    keys = SpiderKeys.for_spider("t", hash_tag=True, shards=12)
    frontier = Frontier(client, keys, "n1")
    primaries = cluster_client.get_primaries()
    cluster_client.script_flush()  # on every primary
    cluster_client.config_resetstat(target_nodes=RedisCluster.PRIMARIES)
    pipe = client.pipeline(transaction=False)
    calls = frontier.enqueue_on(pipe, [entry(f"http://{h}/1") for h in HOSTS])
    pipe.hincrby(keys.checkpoint, "done", 1)
    assert isinstance(calls, int)
    results = execute(pipe)
    assert Added.combine(results[:calls]).new == len(HOSTS)
    assert results[calls] == 1
    assert frontier.sizes().queued == len(HOSTS)

    def count(command: str) -> int:
        stats = [cluster_client.info("commandstats", target_nodes=n) for n in primaries]
        return sum(s.get(f"cmdstat_{command}", {}).get("calls", 0) for s in stats)

    assert count("evalsha") >= 2 * calls  # each failed once (NOSCRIPT), then ran
    assert count("eval") == 0
    assert count("command|getkeys") == count("command") == 0


def test_a_heartbeat_reads_and_reclaims_a_turn_of_shards_and_every_shard_in_a_few(
    redis_client,
):
    """With many shards a heartbeat visits 16 of them (and NAME), not all."""
    from extensions.frontier.frontier import HEARTBEAT_SHARDS

    keys = SpiderKeys.for_spider("t", shards=40)
    hosts = [f"h{n}.example" for n in range(400)]
    node = Frontier(redis_client, keys, "n1")
    node.enqueue([entry(f"http://{h}/") for h in hosts])
    leased: list = []
    while batch := node.lease(64, lease_timeout=600)[0]:
        leased += batch
    assert len(leased) == len(hosts)
    for registry in node.registries():  # the node is dead
        redis_client.zadd(registry, {"n1": now_ms() - 60_000})
    other = Frontier(redis_client, keys, "n2")
    assert other.sizes().in_flight == len(hosts)
    rounds = -(-40 // HEARTBEAT_SHARDS)
    returned = [sum(other.reclaim(node_timeout=30, in_turn=True).requests.values())]
    assert 0 < returned[0] < len(hosts)  # one turn's shards
    for _ in range(rounds - 1):
        returned.append(sum(other.reclaim(node_timeout=30, in_turn=True).requests.values()))
    assert sum(returned) == len(hosts)  # every shard within a few heartbeats
    sizes = other.sizes(in_turn=True)
    assert sizes.in_flight > 0  # the shards not in this turn, as last read
    for _ in range(rounds - 1):
        sizes = other.sizes(in_turn=True)
    assert (sizes.in_flight, sizes.queued) == (0, len(hosts))
