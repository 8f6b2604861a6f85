"""Content duplicates: what the digest keeps and masks, and the digests in a
real Redis (which URL had a content first, per crawl, and Redis away)."""

from __future__ import annotations

import asyncio

import pytest
import redis
from scrapy import Request, Spider
from scrapy.http import HtmlResponse

from extensions.downloadermiddlewares.duplicates import ContentDuplicatesLookup
from extensions.keys import SpiderKeys
from extensions.spidermiddlewares.duplicates import (
    ContentDigests,
    ContentDuplicatesMiddleware,
    content_digest,
    stable_content,
)
from tests.conftest import crawler_with_addon

PAGE = (
    "<html><head><title>Item 7</title><style>.a{{color:red}}</style>"
    "<script>var nonce='{nonce}';</script></head><body><p>Item 7 costs 19.99</p>"
    "<!-- served by {server} --><p>Generated {when}</p><p>{extra}</p></body></html>"
)


def page(nonce="x1", server="web-3", when="2026-12-03T12:00:01.123+00:00", extra="") -> bytes:
    return PAGE.format(nonce=nonce, server=server, when=when, extra=extra).encode()


@pytest.mark.unit
def test_what_changes_on_every_load_does_not_make_a_page_new():
    digest = content_digest(page())
    assert content_digest(page(nonce="y2", server="web-9")) == digest
    assert content_digest(page(when="2027-01-05 08:30")) == digest
    assert content_digest(page(when="08:31:59")) == digest
    assert content_digest(page(when="1764763201")) == digest  # a Unix time
    assert content_digest(page().replace(b" costs", b"\n\t  costs")) == digest


@pytest.mark.unit
def test_a_page_that_says_anything_else_is_new_and_each_crawl_has_its_own():
    digest = content_digest(page())
    assert content_digest(page(extra="in stock")) != digest
    assert content_digest(page().replace(b"19.99", b"18.99")) != digest
    assert content_digest(page().replace(b"Item 7", b"Item 8")) != digest
    assert content_digest(page(), crawl="spring") != digest
    assert len(digest) == 10


def test_the_first_url_of_a_content_is_kept_and_the_same_url_is_never_its_own_duplicate(
    redis_client,
):
    keys = SpiderKeys.for_spider("t")
    digests = ContentDigests(redis_client, keys)
    digest = content_digest(page())
    assert digests.first_url(digest, "http://a.test/item/7") == "http://a.test/item/7"
    assert digests.first_url(digest, "http://a.test/print/7") == "http://a.test/item/7"
    assert digests.first_url(digest, "http://a.test/item/7") == "http://a.test/item/7"
    [key] = redis_client.keys("t:digests:*")
    assert key == f"t:digests:{digest[:2].hex()}".encode()
    assert redis_client.hgetall(key) == {digest[2:]: b"http://a.test/item/7"}


class Shop(Spider):
    name = "t"


def checks(settings: dict) -> tuple[ContentDuplicatesLookup, ContentDuplicatesMiddleware]:
    """The two halves, the downloader's and the spider's, of one node."""
    crawler = crawler_with_addon(Shop, settings=settings)
    return (
        ContentDuplicatesLookup.from_crawler(crawler),
        ContentDuplicatesMiddleware.from_crawler(crawler),
    )


async def _collect(middleware, response, output) -> list:
    async def produced():
        for each in output:
            yield each

    return [each async for each in middleware.process_spider_output_async(response, produced())]


def run(halves, response, output, *, asynchronous: bool = False) -> list:
    """The spider middleware's output once the lookup has asked Redis about
    ``response`` (now, not at a reactor's next turn)."""
    lookup, middleware = halves
    if lookup.wants(response.request, response):
        answered = lookup.ask(response)
        lookup.ask_now()
        lookup.note(response.request, *answered.result)
    if asynchronous:
        return asyncio.run(_collect(middleware, response, output))
    return list(middleware.process_spider_output(response, output))


def response(url: str, body: bytes, status: int = 200) -> HtmlResponse:
    return HtmlResponse(url, body=body, status=status, request=Request(url))


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_duplicate_yields_no_links_and_its_items_are_dropped_or_marked(
    redis_url, redis_client, asynchronous
):
    redis_client.flushall()
    settings = {"REDIS_URL": redis_url, "CONTENT_DUPLICATES": "drop"}
    dropping = checks(settings)
    output = [{"title": "Item 7"}, Request("http://a.test/item/8")]
    first = run(
        dropping, response("http://a.test/item/7", page()), output, asynchronous=asynchronous
    )
    assert first == output  # new: everything goes on
    again = run(dropping, response("http://a.test/p/7", page()), output, asynchronous=asynchronous)
    assert again == []
    # an error page is no page's content
    errors = run(dropping, response("http://a.test/x", page(), 404), output)
    assert errors == output
    marking = checks({**settings, "CONTENT_DUPLICATES": "mark"})
    items = [{"title": "Item 7"}, Request("http://a.test/item/8")]
    marked = run(marking, response("http://a.test/q/7", page()), items, asynchronous=asynchronous)
    assert marked == [{"title": "Item 7", "duplicate_of": "http://a.test/item/7"}]
    stats = marking[1].stats
    assert stats.get_value("duplicates/items_marked") == 1
    assert stats.get_value("duplicates/links_dropped") == 1


def test_with_redis_away_a_page_is_taken_as_new_and_counted(redis_url):
    halves = checks({"REDIS_URL": redis_url, "CONTENT_DUPLICATES": "drop"})
    # Redis goes away mid-crawl (nothing listens on port 1)
    dead = redis.Redis(port=1, socket_connect_timeout=1)
    halves[0].server = dead
    halves[0].digests = ContentDigests(dead, SpiderKeys.for_spider("t"))
    output = [{"title": "Item 7"}]
    got = run(halves, response("http://a.test/7", page()), output)
    assert got == output
    assert halves[0].stats.get_value("duplicates/unchecked") == 1


def test_the_pages_of_one_turn_are_asked_about_in_one_round_trip_in_order(redis_url, redis_client):
    redis_client.flushall()
    lookup, _ = checks({"REDIS_URL": redis_url, "CONTENT_DUPLICATES": "mark"})
    warm = lookup.ask(response("http://a.test/warm", page(extra="warm")))
    lookup.ask_now()  # (Redis learns the script)
    assert warm.result == (None, None)
    pages = [response(f"http://a.test/{n}", page(extra=str(n % 2))) for n in range(4)]
    redis_client.config_resetstat()
    answered = [lookup.ask(each) for each in pages]
    lookup.ask_now()
    # the script for each page and nothing else (what it runs inside aside),
    # answered in the order asked
    calls = {name: stats["calls"] for name, stats in redis_client.info("commandstats").items()}
    assert calls.pop("cmdstat_evalsha") == 4
    assert calls.pop("cmdstat_hsetnx") == calls.pop("cmdstat_hget") == 4
    # (Redis 7 names CONFIG RESETSTAT config|resetstat, Redis 6 config)
    assert set(calls) <= {"cmdstat_info", "cmdstat_config|resetstat", "cmdstat_config"}, calls
    firsts = [each.result[0] for each in answered]
    assert firsts == [None, None, "http://a.test/0", "http://a.test/1"]


@pytest.mark.unit
def test_only_what_looks_like_a_moment_is_masked():
    assert stable_content(b"<p>at 1764763201</p>") == b"<p>at</p>"
    assert stable_content(b"1764763201") == b""
    # an id of the same length but another range, or inside a longer number, stays
    assert stable_content(b"<p>order 1234567890</p>") == b"<p>order1234567890</p>"
    assert stable_content(b"<p>17647632011234567</p>") == b"<p>17647632011234567</p>"
    assert stable_content(b"<p>page 12 of 30</p>") == b"<p>page12of30</p>"
    # a day is not a moment: a calendar's pages, a daily archive's, differ
    assert content_digest(b"<h1>2026-01-02</h1>") != content_digest(b"<h1>2026-01-03</h1>")
    assert content_digest(b"<p>opens 09:00</p>") != content_digest(b"<p>opens 10:00</p>")
    assert stable_content(b"<p>at 2026-01-02 09:00, 09:00:59.5Z</p>") == b"<p>at,</p>"


@pytest.mark.unit
def test_a_call_that_began_before_redis_came_back_is_no_new_outage(caplog):
    import time

    from extensions.connection import RedisHealth

    health = RedisHealth("redis://r")
    started = time.monotonic()
    health.failed(redis.ConnectionError("gone"))
    health.ok()
    health.failed(redis.ConnectionError("timed out"), started)  # from before it was back
    assert not health.is_down
    health.failed(redis.ConnectionError("gone again"), time.monotonic())
    assert health.is_down
    assert [r.getMessage()[:4] for r in caplog.records].count("lost") == 2


def test_a_fault_in_the_lookup_holds_no_page_they_are_taken_as_new(redis_url, caplog):
    lookup, _ = checks({"REDIS_URL": redis_url, "CONTENT_DUPLICATES": "mark"})

    def broken(*args):
        raise ValueError("a fault no test foresaw")

    lookup.digests.ask = broken
    answered = [lookup.ask(response(f"http://a.test/f{n}", page())) for n in range(2)]
    lookup.ask_now()
    assert [each.result for each in answered] == [(None, None), (None, None)]
    assert lookup.stats.get_value("duplicates/unchecked") == 2
    assert "content duplicates not checked for 2 pages" in caplog.text
