"""The distributed scheduler, end to end: real nodes, real Redis, the demo shop."""

import json
import re
import signal
import time

from extensions.frontier.frontier import now_ms
from tests import conftest
from tests.conftest import queue_requests
from tests.helpers import SHOP_PAGES, assert_shop_crawled_once, page_hits, seed, wait_for


def test_two_nodes_share_the_crawl_and_fetch_every_page_once(
    redis_url, redis_client, demo_site, nodes, tmp_path
):
    seed(redis_url, "shop", demo_site.url + "/")
    for node in ("n1", "n2"):
        nodes.start("shop", redis_url, MAX_IDLE_TIME_BEFORE_CLOSE=2, NODE_ID=node,
                    LOGSTATS_INTERVAL=1)  # fmt: skip

    assert nodes.wait(240) == [0, 0], nodes.tail()

    items = assert_shop_crawled_once(demo_site, tmp_path / "items")
    by_node = {node: sum(1 for i in items if i["_node"] == node) for node in ("n1", "n2")}
    assert all(count > 0 for count in by_node.values()), by_node

    for node in ("n1", "n2"):
        record = redis_client.hgetall(f"shop:node:{node}")
        assert record[b"state"] == b"closed"
        assert int(record[b"pages"]) > 0
    assert redis_client.zcard("shop:leases:n1") + redis_client.zcard("shop:leases:n2") == 0
    for index in range(2):
        log = nodes.log(index)
        assert "Traceback" not in log
        assert re.search(r"cluster: \d+ done of \d+ discovered .*; 2 nodes alive", log)
        assert "Deprecat" not in log, "our stack must not trigger deprecation warnings"
        # links met again were dropped on the node, and yet every page came exactly once
        assert nodes.stat(index, "dupefilter/filtered_locally") > 0
        # the start-up heap was frozen out of the collector's way while the spider ran
        assert nodes.stat(index, "gc/frozen_objects") > 10_000
        assert "gc/collections/gen0" in nodes.stats(index)
    # counted per flush, not per request: the totals are still exact
    assert nodes.total("frontier/dequeued") == len(SHOP_PAGES)
    assert nodes.total("frontier/enqueued") >= len(SHOP_PAGES)


def test_a_node_waits_while_another_node_still_holds_work(
    redis_url, redis_client, demo_site, nodes
):
    # Another (live) node holds a lease: its work may still produce new requests.
    redis_client.zadd("shop:nodes", {"other": now_ms()})
    redis_client.zadd("shop:leases:other", {json.dumps({"url": demo_site.url + "/"}): 1e15})
    node = nodes.start("shop", redis_url, MAX_IDLE_TIME_BEFORE_CLOSE=1, NODE_TIMEOUT=60)
    wait_for(lambda: "joined the crawl" in nodes.log(0), 60, "node start")

    for _ in range(40):  # 4 s, several times MAX_IDLE_TIME_BEFORE_CLOSE
        redis_client.zadd("shop:nodes", {"other": now_ms()})
        time.sleep(0.1)
        assert node.poll() is None, "closed while another node still had work:\n" + nodes.tail()

    # The other node finishes: its lease goes, the request it discovered arrives.
    with redis_client.pipeline() as pipe:
        pipe.delete("shop:leases:other")
        queue_requests(
            redis_client, "shop", json.dumps({"url": demo_site.url + "/about"}), pipe=pipe
        )
        pipe.execute()
    assert nodes.wait(60) == [0]
    assert page_hits(demo_site) == {"/about": 1}


def test_leases_of_a_dead_node_are_crawled_by_another(redis_url, redis_client, demo_site, nodes):
    long_ago = now_ms() - 600_000
    redis_client.zadd("shop:nodes", {"ghost": long_ago})
    redis_client.zadd("shop:leases:ghost", {json.dumps({"url": demo_site.url + "/about"}): 1e15})

    nodes.start("shop", redis_url, MAX_IDLE_TIME_BEFORE_CLOSE=1, NODE_TIMEOUT=5)

    assert nodes.wait(60) == [0]
    assert page_hits(demo_site) == {"/about": 1}
    assert "returned 1 requests leased by node ghost to the queue" in nodes.log(0)


def test_graceful_stop_hands_work_back_and_a_new_node_resumes(
    redis_url, redis_client, demo_site, nodes, tmp_path
):
    seed(redis_url, "shop", demo_site.url + "/")
    first = nodes.start("shop", redis_url, MAX_IDLE_TIME_BEFORE_CLOSE=2, NODE_ID="first")
    wait_for(lambda: sum(page_hits(demo_site).values()) > 300, 60, "first pages")
    first.send_signal(signal.SIGINT)
    first.wait(60)
    assert first.returncode == 0, nodes.tail()
    assert redis_client.zcard("shop:leases:first") == 0  # nothing left leased
    queued = len(conftest.queued(redis_client, "shop"))
    assert queued > 0, "stopped too late to test resuming"

    nodes.start("shop", redis_url, MAX_IDLE_TIME_BEFORE_CLOSE=2, NODE_ID="second")
    assert nodes.wait(240)[1] == 0
    assert "resuming shop:" in nodes.log(1)

    assert_shop_crawled_once(demo_site, tmp_path / "items")


IDLE_LOOK = "no work anywhere; looking again in "


def test_an_idle_node_takes_a_new_start_url_at_its_next_look(
    redis_url, redis_client, demo_site, nodes
):
    # A node with nothing to do keeps looking for work, at its slowest pace
    # (FRONTIER_IDLE_POLL_MAX), and never closes (MAX_IDLE_TIME_BEFORE_CLOSE=0).
    node = nodes.start("shop", redis_url, MAX_IDLE_TIME_BEFORE_CLOSE=0, LOG_LEVEL="DEBUG",
                       FRONTIER_IDLE_POLL_MAX=0.5)  # fmt: skip
    wait_for(lambda: nodes.log(0).count(IDLE_LOOK) >= 3, 60, "three idle looks")
    assert f"{IDLE_LOOK}0.50 s" in nodes.log(0)

    looks_before_push = nodes.log(0).count(IDLE_LOOK)
    redis_client.lpush("shop:start_urls", demo_site.url + "/about")  # as a user would
    wait_for(lambda: page_hits(demo_site).get("/about") == 1, 30, "the pushed URL fetched")
    # the site counts the hit before the node has read the answer and logged it
    crawled_line = f"Crawled (200) <GET {demo_site.url}/about>"
    wait_for(lambda: crawled_line in nodes.log(0), 30, "the pushed URL's response logged")

    log = nodes.log(0)
    crawled = log.index(crawled_line)
    # The look under way during the push may have missed it; the next one did not.
    assert log[:crawled].count(IDLE_LOOK) - looks_before_push <= 1

    # Still idle and looking: the node carries on without a restart.
    wait_for(lambda: nodes.log(0).count(IDLE_LOOK) >= log.count(IDLE_LOOK) + 2, 30, "idle again")
    assert node.poll() is None

    # A recrawl once the crawl is over and its dupefilter cleared: the node does
    # not drop the URL on the strength of having sent it before.
    redis_client.delete(*redis_client.keys("shop:dupefilter*"))  # the count and its levels
    redis_client.lpush("shop:start_urls", demo_site.url + "/about")
    wait_for(lambda: page_hits(demo_site).get("/about") == 2, 30, "the recrawl")
    node.send_signal(signal.SIGINT)
    assert nodes.wait(60) == [0]
    assert page_hits(demo_site) == {"/about": 2}
