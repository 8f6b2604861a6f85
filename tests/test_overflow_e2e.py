"""FRONTIER_OVERFLOW for real: crawls of the demo site's wide section (1,000 pages
of ten new links each), whose host queue overflows to MongoDB at once."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from demosite.wide import wide_paths
from tests.conftest import scrapy
from tests.helpers import page_hits, restart, seed, site_times, wait_for

WIDE = set(wide_paths())


def wide_settings(mongo_uri: str, database: str, **more):
    return {
        "MONGO_URI": mongo_uri, "MONGO_DATABASE": database, "FRONTIER_OVERFLOW": "mongo",
        "FRONTIER_HOST_QUEUE_MAX": 10, "FRONTIER_OVERFLOW_INTERVAL": 0.1,
        "MAX_IDLE_TIME_BEFORE_CLOSE": 2, **more,
    }  # fmt: skip


def test_a_wide_crawl_keeps_ten_per_host_in_redis_and_fetches_in_discovery_order(
    redis_url, redis_client, mongo_db, demo_site, nodes
):
    uri, database, db = mongo_db
    seed(redis_url, "site", demo_site.url + "/wide/")
    # one request at a time: the fetch order is the lease order
    one_at_a_time = wide_settings(uri, database, CONCURRENT_REQUESTS=1, FRONTIER_FETCH_BATCH=1)
    nodes.start("site", redis_url, spider_args={"allow": "/wide/"}, **one_at_a_time)
    peak = 0

    def running() -> bool:
        nonlocal peak
        for key in redis_client.scan_iter("site:queue:*"):
            peak = max(peak, redis_client.zcard(key))
        return nodes.procs[0].poll() is None

    # the queue sampled from the start too: on a slow machine the status commands
    # below outlasted the crawl, and the loop after them saw no queue at all
    def spilled() -> bool:
        running()
        return int(redis_client.hget("site:frontier", "spilled") or 0) > 100

    wait_for(spilled, 60, "requests in MongoDB")
    shown = scrapy("status", "site", "-s", f"REDIS_URL={redis_url}").stdout
    assert "in MongoDB)" in shown, shown
    hosts = scrapy("status", "site", "--hosts", "--json", "-s", f"REDIS_URL={redis_url}").stdout
    (row,) = json.loads(hosts)["hosts"]
    assert row["host"] == "127.0.0.1" and 0 < row["spilled"] <= row["queued"]
    while running():
        time.sleep(0.05)
    assert nodes.wait(10) == [0], nodes.tail()

    times = site_times(demo_site)
    fetched = {path: hits for path, hits in times.items() if path.startswith("/wide/")}
    assert set(fetched) == WIDE and all(len(hits) == 1 for hits in fetched.values())
    assert sorted(fetched, key=lambda path: fetched[path][0]) == wide_paths()
    assert 0 < peak <= 10
    assert nodes.stat(0, "overflow/spilled") > 500
    assert nodes.stat(0, "overflow/refilled") == nodes.stat(0, "overflow/spilled")
    assert db["site_frontier"].count_documents({"t": {"$eq": None}}) == 0
    stored = {doc["url"].removeprefix(demo_site.url) for doc in db["site"].find({}, {"url": 1})}
    assert stored == WIDE  # an item for every page
    frontier = redis_client.hgetall("site:frontier")
    assert int(frontier[b"queued"]) == 0 and int(frontier[b"spilled"]) == 0


@pytest.mark.chaos
# paced: on a loaded machine the crawl may have found every page before MongoDB
# goes away, and with nothing left to spill the peer has no reason to hold back
@pytest.mark.paced
def test_kill_9_during_spills_and_refills_and_a_mongodb_outage_lose_nothing(
    redis_url, redis_client, own_mongo, demo_site, nodes, tmp_path
):
    import pymongo

    uri = own_mongo["service"].url
    # Every page is found once the first hundred are fetched (ten new links each):
    # paced so that MongoDB goes away seconds before that, not a fraction of one.
    # The item store waiting for MongoDB holds the peer's leases as well: a small
    # spill bound is met before that. The victim's leases come back after the
    # default NODE_TIMEOUT, while the peer still crawls
    settings = wide_settings(uri, "crawl", CONCURRENT_REQUESTS=4, FRONTIER_OVERFLOW_BACKLOG=20,
                             DOWNLOAD_DELAY=0.05)  # fmt: skip
    seed(redis_url, "site", demo_site.url + "/wide/")
    victim = nodes.start("site", redis_url, spider_args={"allow": "/wide/"},
                         NODE_ID="victim", **settings)  # fmt: skip
    nodes.start("site", redis_url, spider_args={"allow": "/wide/"}, NODE_ID="peer", **settings)
    mongo = pymongo.MongoClient(uri, serverSelectionTimeoutMS=5000)
    frontier_docs = mongo["crawl"]["site_frontier"]

    # both nodes spill and refill (requests came back: tombstones); the victim dies
    wait_for(lambda: frontier_docs.count_documents({"t": {"$ne": None}}) > 0, 60, "refills")
    held = redis_client.zcard("site:leases:victim")
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait(10)
    held = max(held, redis_client.zcard("site:leases:victim"))
    mongo.close()

    # MongoDB goes away: spills wait in Redis; past the bound the peer leases nothing.
    # What the crawl still finds by itself depends on how many pages with new links
    # were in Redis at that moment (the rest wait in MongoDB): forty more start URLs
    # are found for certain, beyond the host's queue of ten
    found = len(page_hits(demo_site))
    own_mongo["service"].stop()
    seed(redis_url, "site", *(f"{demo_site.url}/product/{n}" for n in range(1, 41)))
    try:
        wait_for(lambda: redis_client.hget("site:node:peer", "spill_held") == b"1", 60,
                 "the peer held back")  # fmt: skip
    except pytest.fail.Exception:
        raise AssertionError((found, len(page_hits(demo_site)), redis_client.llen("site:spill"),
                              nodes.tail(80))) from None  # fmt: skip
    leased = redis_client.hget("site:host:127.0.0.1", "leased")
    time.sleep(2)
    assert redis_client.hget("site:host:127.0.0.1", "leased") == leased
    shown = scrapy("status", "site", "-s", f"REDIS_URL={redis_url}").stdout
    assert "held back: MongoDB takes no spills" in shown, shown
    restart(own_mongo, tmp_path)

    codes = nodes.wait(180)
    assert codes[1] == 0, nodes.tail()
    hits = page_hits(demo_site)
    assert {path for path in hits if path.startswith("/wide/")} == WIDE, "pages lost"
    assert {f"/product/{n}" for n in range(1, 41)} <= set(hits), "start URLs lost"
    twice = {path for path, n in hits.items() if n > 1}
    assert len(twice) <= held, (twice, held)  # what the killed node held, no more
    # (a death between the steps of a spill or a refill: tests/test_overflow.py)
    assert nodes.stat(1, "overflow/held_back") >= 1
    frontier = redis_client.hgetall("site:frontier")
    assert int(frontier[b"queued"]) == 0 and int(frontier[b"spilled"]) == 0
    assert redis_client.llen("site:dlq") == 0
    assert not list(redis_client.scan_iter("site:spilling:*"))
    assert redis_client.hlen("site:refilled") == 0
    client = pymongo.MongoClient(own_mongo["service"].url, serverSelectionTimeoutMS=5000)
    try:
        waiting = client["crawl"]["site_frontier"].count_documents({"t": {"$eq": None}})
        assert waiting == 0
    finally:
        client.close()
