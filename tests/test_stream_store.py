"""The stream store (``ITEM_STORE = "stream"``) on a real Redis: each item once
by its id, a changed one again, the stream and its ids bounded, a key of the
wrong type refused with the reason and nothing half-written; which stores the
settings pick; a crawl into a stream whose key is of the wrong type holds its
pages, says why in ``scrapy status``, and stores every page once when the key
is fixed (a consumer group reads them)."""

from __future__ import annotations

import json

import pytest
import redis
from scrapy.settings import Settings

from extensions.pipelines.declared import stores_named, stores_problem
from extensions.pipelines.documents import item_id
from extensions.pipelines.stream import StreamStore
from tests.conftest import crawler_with_addon, read_items, scrapy
from tests.helpers import SMALL_SHOP, SMALL_SHOP_PAGES, read_group, seed, wait_for


def store(client: redis.Redis, tmp_path, maxlen: int = 100) -> StreamStore:
    return StreamStore(client, "shop:items", "shop:items:ids", collection="shop",
                       maxlen=maxlen, rejected_path=tmp_path / "rejected.jsonl")  # fmt: skip


def page(n: int, price: str = "1.00", **more) -> dict:
    return {"url": f"http://shop.test/item/{n}", "price": price, "_spider": "shop", **more}


def test_an_item_stored_again_unchanged_is_one_entry_and_a_changed_one_is_added(
    redis_client, tmp_path
):
    items = store(redis_client, tmp_path)
    first = items.write([page(1), page(2), page(3)])
    again = items.write([page(1), page(2), page(3)])  # a page fetched twice
    changed = items.write([page(2, price="2.50"), page(3)])
    assert (first.written, again.written, again.duplicates) == (3, 0, 3)
    assert (changed.written, changed.duplicates) == (1, 1)
    entries = read_group(redis_client)
    assert [json.loads(e["item"])["url"][-1] for e in entries] == ["1", "2", "3", "2"]
    assert json.loads(entries[-1]["item"])["price"] == "2.50"
    # the id every store gives the item: MongoDB's _id too
    assert entries[0]["_id"] == item_id(page(1), "url", "shop")
    assert len({e["_id"] for e in entries}) == 3
    assert "collection" not in entries[0]


def test_the_stream_and_its_ids_stay_within_maxlen(redis_client, tmp_path):
    items = store(redis_client, tmp_path, maxlen=5)
    for start in range(0, 40, 8):
        items.write([page(n) for n in range(start, start + 8)])
    assert redis_client.xlen("shop:items") == 5
    assert redis_client.hlen("shop:items:ids") == 5
    kept = {e["_id"] for e in read_group(redis_client)}
    assert kept == {item_id(page(n), "url", "shop") for n in range(35, 40)}
    # an item the stream no longer holds is added again when stored again
    assert items.write([page(1)]).written == 1


def test_a_key_of_the_wrong_type_is_refused_with_the_reason_and_nothing_written(
    redis_client, tmp_path
):
    redis_client.set("shop:items", "not a stream")
    with pytest.raises(redis.ResponseError, match="shop:items holds a string, not a stream"):
        store(redis_client, tmp_path).write([page(1)])
    assert not redis_client.exists("shop:items:ids")


def test_items_no_store_can_take_are_kept_with_the_reason_and_the_rest_stored(
    redis_client, tmp_path
):
    deep: dict = {}
    for _ in range(120):
        deep = {"inner": deep}
    report = store(redis_client, tmp_path).write(
        [page(1), {"price": "1", "_spider": "shop"}, page(2, nested=deep)]
    )
    assert (report.written, report.rejected) == (1, 2)
    kept = [json.loads(line) for line in (tmp_path / "rejected.jsonl").read_text().splitlines()]
    assert ["missing its key field" in k["reason"] for k in kept] == [True, False]
    assert "nested more than 100 levels" in kept[1]["reason"]


@pytest.mark.parametrize(
    ("values", "named", "problem"),
    [
        ({}, ["jsonl"], None),
        ({"MONGO_URI": "mongodb://db"}, ["mongo"], None),
        ({"ITEM_STORE": "stream"}, ["stream"], None),
        ({"ITEM_STORES": "mongo,stream", "MONGO_URI": "mongodb://db"}, ["mongo", "stream"], None),
        ({"ITEM_STORES": '["jsonl", "stream"]'}, ["jsonl", "stream"], None),
        ({"ITEM_STORE": "kafka"}, ["kafka"], "'kafka' is no store"),
        ({"ITEM_STORE": "mongo"}, ["mongo"], "needs MONGO_URI"),
        ({"ITEM_STORES": ["stream", "stream"]}, ["stream", "stream"], "names a store twice"),
        ({"ITEM_STORE": "jsonl", "ITEM_STORES": ["stream"]}, ["stream"], "not both"),
    ],
)
def test_the_settings_pick_the_stores(values, named, problem):
    settings = Settings(values)
    assert stores_named(settings) == named
    found = [stores_problem(settings, name) for name in ("ITEM_STORE", "ITEM_STORES")]
    found = [f for f in found if f]
    if problem is None:
        assert found == []
    else:
        assert len(found) == 1 and problem in found[0], found


def test_with_a_redis_cluster_a_stream_key_needs_a_hash_tag():
    from crawler.spiders.shop import ShopSpider
    from extensions.exceptions import ConfigError

    cluster = {"ITEM_STORE": "stream", "REDIS_CLUSTER": True}
    with pytest.raises(ConfigError, match=r"STREAM_KEY = 'items': .* needs a hash tag"):
        crawler_with_addon(ShopSpider, {**cluster, "STREAM_KEY": "items"})
    with pytest.raises(ConfigError, match=r"ITEM_STORES = 'kafka'.*is no store"):
        crawler_with_addon(ShopSpider, {"ITEM_STORES": "kafka"})
    crawler_with_addon(ShopSpider, {**cluster, "STREAM_KEY": "{shop}:items"})


def test_a_crawl_into_a_stream_key_of_the_wrong_type_holds_its_pages_says_why_and_loses_none(
    redis_url, redis_client, small_shop, nodes, tmp_path
):
    redis_client.set("shop:items", "in the way")  # another program's key
    seed(redis_url, "shop", small_shop.url + "/")
    nodes.start("shop", redis_url, NODE_ID="n1", ITEM_STORES="jsonl,stream",
                MAX_IDLE_TIME_BEFORE_CLOSE=2)  # fmt: skip
    wait_for(lambda: redis_client.hget("shop:node:n1", "store_problem"), 90, "the store refused")
    status = scrapy("status", "shop", "-s", f"REDIS_URL={redis_url}").stdout
    assert "item store: the Redis stream shop:items" in status, status
    assert "holds a string, not a stream" in status
    assert redis_client.zcard("shop:leases:n1") > 0  # its pages wait, leased
    redis_client.delete("shop:items")
    assert nodes.wait(180) == [0], nodes.tail()

    entries = read_group(redis_client)
    urls = [json.loads(entry["item"])["url"] for entry in entries]
    assert len(urls) == len(set(urls)) == len({entry["_id"] for entry in entries})
    # in the JSON Lines store once each too: a store that failed had the batch
    # again, the one that had taken it did not
    lines = read_items(tmp_path / "items")
    assert sorted(item["url"] for item in lines) == sorted(urls)
    assert {url.removeprefix(small_shop.url) for url in urls} <= SMALL_SHOP_PAGES
    assert len(urls) >= 5 * SMALL_SHOP
    assert not redis_client.hget("shop:node:n1", "store_problem")
    assert nodes.stat(0, "item_store/write_errors") >= 1
