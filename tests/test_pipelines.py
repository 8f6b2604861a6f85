"""The item store pipeline in real crawls: MongoDB-wire server, JSON Lines, a Redis stream."""

import json

from servers import services
from tests.conftest import read_items, site_hits
from tests.helpers import ALLOW, good_pages, read_group, restart, wait_for
from tests.helpers import CHAOS_SETTINGS as SETTINGS


def test_two_nodes_store_each_page_once_in_mongodb(redis_url, redis_client, mongo_db, nodes):
    uri, database, db = mongo_db
    # a second per page: the crawl outlasts the second node's start on a loaded machine
    site = services.start_demo_site(latency=1.0)
    try:
        # the shop's pages alone: retries and failing pages are test_chaos.py's
        redis_client.lpush("site:start_urls", site.url + "/category/books")
        settings = {**SETTINGS, "MONGO_URI": uri, "MONGO_DATABASE": database,
                    "ITEM_STORES": "mongo,stream"}  # fmt: skip
        for n in (1, 2):
            nodes.start("site", redis_url, spider_args={"allow": ALLOW}, NODE_ID=f"n{n}",
                        **settings)  # fmt: skip
        assert nodes.wait(180) == [0, 0], nodes.tail()
    finally:
        site.stop()

    books = {page for page in good_pages() if not page.startswith("/flaky/")}
    stored = list(db["site"].find({}))
    assert {d["url"].removeprefix(site.url) for d in stored} == books
    assert len(stored) == len(books)
    assert {d["_spider"] for d in stored} == {"site"}
    assert {d["_node"] for d in stored} == {"n1", "n2"}
    assert all(d.get("_fetched_at") and d.get("_first_seen") for d in stored)
    logs = nodes.log(0) + nodes.log(1)
    assert nodes.total("mongo/written") == len(stored)
    assert "item store MongoDB" in logs and "closed:" in logs
    # the same items in the stream, once each, by the _id MongoDB's documents have
    entries = read_group(redis_client, "site:items")
    assert sorted(e["_id"] for e in entries) == sorted(d["_id"] for d in stored)
    by_id = {d["_id"]: d["url"] for d in stored}
    assert all(json.loads(e["item"])["url"] == by_id[e["_id"]] for e in entries)


def test_mongodb_stopped_mid_crawl_loses_no_item(redis_url, redis_client, tmp_path, nodes):
    port = services.free_port()
    own = {"service": services.start_mongo_wire(tmp_path / "own-mongo", port), "port": port}
    # slow enough that the crawl outlasts MongoDB's outage
    site = services.start_demo_site(latency=0.3)
    try:
        redis_client.lpush("site:start_urls", site.url + "/category/books")
        settings = {
            **SETTINGS,
            "MONGO_URI": own["service"].url + "/?serverSelectionTimeoutMS=300",
            "MONGO_DATABASE": "crawl",
            "MONGO_RETRY_TIME": 1,
            "MONGO_JOURNAL_DIR": tmp_path / "journal",
        }
        nodes.start("site", redis_url, spider_args={"allow": ALLOW}, **settings)
        wait_for(lambda: sum(site_hits(site).values()) >= 40, 60, "crawl start")
        own["service"].stop()
        wait_for(lambda: "MongoDB unreachable" in nodes.log(0), 60, "the node finding MongoDB gone")
        restart(own, tmp_path)
        assert nodes.wait(120) == [0], nodes.tail()

        import pymongo

        client = pymongo.MongoClient(own["service"].url)
        stored = {d["url"].removeprefix(site.url) for d in client.crawl.site.find({}, {"url": 1})}
        client.close()
        mongo_stats = {k: v for k, v in nodes.stats(0).items() if k.startswith(("mongo/", "item"))}
        expected = {p for p in good_pages() if not p.startswith("/flaky/")}
        assert stored == expected, (len(stored), mongo_stats, nodes.tail(60))
        log = nodes.log(0)
        assert nodes.stat(0, "mongo/spilled") > 0
        assert nodes.stat(0, "mongo/replayed") == nodes.stat(0, "mongo/spilled")
        assert log.count("spilling batches to") == 1
        assert list((tmp_path / "journal" / "site").glob("*.bson")) == []
    finally:
        own["service"].stop()
        site.stop()


def test_backpressure_slows_the_crawl_instead_of_buffering(
    redis_url, redis_client, demo_site, nodes, tmp_path
):
    redis_client.lpush("site:start_urls", demo_site.url + "/category/books")
    nodes.start(
        "site", redis_url, spider_args={"allow": ALLOW}, MAX_IDLE_TIME_BEFORE_CLOSE=1,
        ITEM_STORE_BATCH_SIZE=4, ITEM_STORE_MAX_PENDING=4,
    )  # fmt: skip
    assert nodes.wait(120) == [0], nodes.tail()
    assert nodes.stat(0, "item_store/backpressure_waits") > 0
    stored = [i["url"].removeprefix(demo_site.url) for i in read_items(tmp_path / "items")]
    assert sorted(stored) == sorted(p for p in good_pages() if not p.startswith("/flaky/"))


def test_an_item_the_store_cannot_take_is_dropped_with_a_reason(
    redis_url, redis_client, mongo_db, demo_site, nodes, tmp_path
):
    uri, database, db = mongo_db
    redis_client.lpush("nokey:start_urls", demo_site.url + "/about")
    nodes.start(
        "nokey", redis_url, MAX_IDLE_TIME_BEFORE_CLOSE=1, SPIDER_MODULES="tests.spiders",
        MONGO_URI=uri, MONGO_DATABASE=database, MONGO_JOURNAL_DIR=tmp_path / "journal",
    )  # fmt: skip
    assert nodes.wait(60) == [0], nodes.tail()
    assert [d["url"] for d in db["nokey"].find({})] == [demo_site.url + "/about"]
    log = nodes.log(0)
    assert "the item store cannot take this item: missing its key field 'url'" in log
    assert nodes.stat(0, "mongo/rejected") == 1
    assert nodes.stat(0, "item_dropped_count") == 1
    assert (tmp_path / "journal" / "nokey" / "rejected.jsonl").exists()
