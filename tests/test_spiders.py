"""Distributed spiders: start URLs from Redis, bad entries, the generic ``site`` spider."""

import json

from demosite import catalog
from tests.conftest import read_items, site_hits
from tests.helpers import SMALL_SHOP, page_hits, seed

BAD_ENTRIES = [
    b"\xff\xfe garbage",
    b"not a url at all",
    b"{invalid json",
    b'{"meta": {"no": "url"}}',
    b"ftp://127.0.0.1/file.txt",
    b"javascript:alert(1)",
]


def test_site_spider_stores_one_item_per_html_page_and_obeys_robots(
    redis_url, small_shop, nodes, tmp_path
):
    seed(redis_url, "site", small_shop.url + "/")
    nodes.start("site", redis_url, MAX_IDLE_TIME_BEFORE_CLOSE=1)
    assert nodes.wait(240) == [0], nodes.tail()

    hits = site_hits(small_shop)
    assert not any(path.startswith("/private/") for path in hits)
    items = read_items(tmp_path / "items")
    by_url = {item["url"].removeprefix(small_shop.url): item for item in items}
    assert len(by_url) == len(items)
    assert set(by_url) == catalog.expected_pages(SMALL_SHOP)

    home = by_url["/"]
    assert home["status"] == 200
    assert home["title"] == "Demo Shop"
    assert home["depth"] == 0
    assert home["referer"] is None
    product = by_url["/product/1"]
    assert product["depth"] >= 2
    assert product["referer"].startswith(small_shop.url)
    assert product["fetched_at"].endswith("+00:00")


def test_bad_start_entries_are_dead_lettered_and_the_crawl_goes_on(
    redis_url, redis_client, demo_site, nodes
):
    redis_client.lpush("shop:start_urls", *BAD_ENTRIES)
    redis_client.lpush("shop:start_urls", demo_site.url + "/about")
    nodes.start("shop", redis_url, MAX_IDLE_TIME_BEFORE_CLOSE=1)
    assert nodes.wait(60) == [0], nodes.tail()

    assert page_hits(demo_site) == {"/about": 1}
    letters = [json.loads(raw) for raw in redis_client.lrange("shop:dlq", 0, -1)]
    assert len(letters) == len(BAD_ENTRIES)
    assert {letter["kind"] for letter in letters} == {"start_url"}
    assert all(letter["error"] and letter["node"] for letter in letters)
    reasons = " | ".join(letter["error"] for letter in letters)
    for expected in ("not UTF-8", "white space", "invalid JSON", "no 'url'", "'ftp'",
                     "'javascript'"):  # fmt: skip
        assert expected in reasons
    log = nodes.log(0)
    assert log.count("invalid start URL entry") == len(BAD_ENTRIES)
    assert f"'start_urls/invalid': {len(BAD_ENTRIES)}" in log


def test_a_spiders_own_start_requests_run_once_across_nodes(redis_url, demo_site, nodes):
    # start_requests() is not ignored, and two nodes fetch its URL once.
    for _ in range(2):
        nodes.start(
            "ownstart", redis_url, spider_args={"start": demo_site.url + "/about"},
            MAX_IDLE_TIME_BEFORE_CLOSE=1, SPIDER_MODULES="tests.spiders",
        )  # fmt: skip
    assert nodes.wait(60) == [0, 0], nodes.tail()
    assert page_hits(demo_site) == {"/about": 1}


def test_a_request_that_cannot_be_stored_is_dead_lettered_not_fatal(
    redis_url, redis_client, demo_site, nodes
):
    redis_client.lpush("badmeta:start_urls", demo_site.url + "/")
    nodes.start("badmeta", redis_url, MAX_IDLE_TIME_BEFORE_CLOSE=1, SPIDER_MODULES="tests.spiders")
    assert nodes.wait(60) == [0], nodes.tail()

    assert page_hits(demo_site) == {"/": 1, "/category/books": 1}
    (letter,) = [json.loads(raw) for raw in redis_client.lrange("badmeta:dlq", 0, -1)]
    assert letter["kind"] == "unserializable"
    assert letter["url"] == demo_site.url + "/about"
    assert "request.meta['handle']" in letter["error"]
    assert "cannot queue" in nodes.log(0)
