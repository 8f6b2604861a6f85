"""A node's unconfirmed work is bounded (FRONTIER_MAX_UNCONFIRMED): with a slow
item store it stops leasing instead of piling fetched pages up, so a kill -9
costs at most about the bound in pages fetched again.

A real crawl of the demo shop, items going to MongoDB (nx-27017) through a TCP
forwarder that holds every reply, so each batch takes a while to store."""

from __future__ import annotations

import os
import signal
import time

import pytest

from demosite import catalog
from servers import services
from tests.conftest import scrapy, site_hits
from tests.helpers import SMALL_SHOP_PAGES, page_hits, seed, wait_for

pytestmark = pytest.mark.chaos

BOUND = 24


def test_a_slow_item_store_holds_a_node_to_its_bound_and_a_kill_9_costs_no_more(
    redis_url, redis_client, mongo_db, small_shop, nodes
):
    mongo_uri, database, db = mongo_db
    proxy = services.start_latency_proxy(mongo_uri, 150)
    slow_uri = proxy.url.replace("redis://", "mongodb://").removesuffix("/0") + "/"
    try:
        seed(redis_url, "shop", small_shop.url + "/")
        slow = nodes.start(
            "shop", redis_url, NODE_ID="slow", MONGO_URI=slow_uri, MONGO_DATABASE=database,
            ITEM_STORE_BATCH_SIZE=5, ITEM_STORE_MAX_PENDING=10, CONCURRENT_REQUESTS=8,
            FRONTIER_MAX_UNCONFIRMED=BOUND,
        )  # fmt: skip
        record = "shop:node:slow"
        wait_for(lambda: redis_client.hget(record, "held_back") == b"1", 90, "the node held back")
        peak = 0
        for _ in range(40):  # while it waits for its store, it leases no more
            peak = max(peak, redis_client.zcard("shop:leases:slow"))
            time.sleep(0.1)
        assert 0 < peak <= BOUND
        assert int(redis_client.hget(record, "unconfirmed")) <= BOUND
        # scrapy status says why the node waits, whenever it waits (it goes on
        # between two waits: a status taken then has nothing to say)
        said = "held back: waiting for its item store"
        shown = ""
        for _ in range(10):
            shown = scrapy("status", "shop", "-s", f"REDIS_URL={redis_url}").stdout
            if said in shown:
                break
        assert said in shown, shown

        os.killpg(slow.pid, signal.SIGKILL)
        slow.wait(10)
        held = redis_client.zcard("shop:leases:slow")
        assert held <= BOUND
        stored = db["shop"].count_documents({})
    finally:
        proxy.stop()

    nodes.start("shop", redis_url, NODE_ID="fast", MAX_IDLE_TIME_BEFORE_CLOSE=2)
    codes = nodes.wait(240)
    assert codes[1] == 0, nodes.tail()
    hits = page_hits(small_shop)
    assert set(hits) == SMALL_SHOP_PAGES, "pages lost"
    twice = {path for path, n in hits.items() if n > 1}
    # what the killed node held, fetched again, and nothing more
    assert len(twice) <= held <= BOUND, (len(twice), held)
    assert stored > 0 and site_hits(small_shop)["/"] == 1


def test_a_node_at_its_bound_has_its_items_written_without_waiting_for_the_interval(
    redis_url, demo_site, nodes
):
    # A bound far below one item batch, and a store that would wait 20 s before
    # writing a batch that is not full: the node, at its bound, tells the store to
    # write what it holds (signals.backlog_full), or it would stall 20 s at each of
    # its 15 bounds (the crawl's last items still wait out the interval once).
    books = {"/category/books"} | {
        f"/category/books?page={n}" for n in range(2, catalog.pages_in("books") + 1)
    }
    books |= {f"/product/{i}" for i in catalog.product_ids("books")}
    seed(redis_url, "site", demo_site.url + "/category/books")
    nodes.start("site", redis_url, spider_args={"allow": "/category/books,/product/"},
                FRONTIER_MAX_UNCONFIRMED=10, ITEM_STORE_FLUSH_INTERVAL=20,
                CONCURRENT_REQUESTS=4, MAX_IDLE_TIME_BEFORE_CLOSE=2)  # fmt: skip
    assert nodes.wait(120) == [0], nodes.tail()
    assert set(page_hits(demo_site)) == books
    assert nodes.stat(0, "frontier/backlog_full") > 0
    assert nodes.stat(0, "frontier/backlog_max") <= 10
