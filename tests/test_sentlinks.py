"""A link the node already sent is dropped where the callback yields it, before any
other middleware, the engine or the scheduler spends time on it."""

import asyncio
import logging

import pytest
from scrapy import Request
from scrapy.exceptions import NotConfigured
from scrapy.http import HtmlResponse

from extensions.spidermiddlewares.sentlinks import SentLinksMiddleware
from tests.conftest import crawler_with_addon
from tests.test_scheduler_unit import open_scheduler, stop_loops

PAGE = HtmlResponse("http://s/", body=b"<html></html>", request=Request("http://s/"))


def outputs() -> list:
    return [
        {"url": "http://s/"},  # an item goes on
        Request("http://s/a"),  # sent: dropped
        Request("http://s/a#part"),  # the same page under Scrapy's fingerprint: dropped
        Request("http://s/a", dont_filter=True),
        Request("http://s/a", method="POST", body=b"q=1"),
        Request("http://s/a", meta={"crawl_id": "nightly"}),  # sent for another crawl
        Request("http://s/new"),
    ]


def kept_of(output: list) -> list:
    return [o if isinstance(o, dict) else (o.method, o.url, o.dont_filter) for o in output]


EXPECTED = [
    {"url": "http://s/"},
    ("GET", "http://s/a", True),
    ("POST", "http://s/a", False),
    ("GET", "http://s/a", False),  # the nightly crawl's
    ("GET", "http://s/new", False),
]


def test_a_request_the_node_sent_is_dropped_and_counted_as_the_scheduler_counts_it(redis_url):
    scheduler = open_scheduler(redis_url)
    try:
        crawler = scheduler.node.crawler
        middleware = SentLinksMiddleware.from_crawler(crawler)
        assert scheduler.enqueue_request(Request("http://s/a"))
        result = middleware.process_spider_output(PAGE, outputs())
        assert kept_of(list(result)) == EXPECTED
        assert crawler.stats.get_value("dupefilter/filtered_locally") == 2
        assert crawler.stats.get_value("dupefilter/filtered") == 2

        async def outputs_async():
            for output in outputs():
                yield output

        async def drain():
            return [o async for o in middleware.process_spider_output_async(PAGE, outputs_async())]

        assert kept_of(asyncio.run(drain())) == EXPECTED
        assert crawler.stats.get_value("dupefilter/filtered_locally") == 4
        # what went on reaches the scheduler as before: the new page is queued
        assert scheduler.enqueue_request(Request("http://s/new"))
    finally:
        stop_loops(scheduler)


def test_with_host_ranks_a_link_to_another_host_goes_on_for_the_link_graph(redis_url):
    scheduler = open_scheduler(redis_url, FRONTIER_ORDER="importance")
    try:
        middleware = SentLinksMiddleware.from_crawler(scheduler.node.crawler)
        assert scheduler.enqueue_request(Request("http://s/a"))
        assert scheduler.enqueue_request(Request("http://other/x"))
        links = [Request("http://s/a"), Request("http://other/x")]
        kept = list(middleware.process_spider_output(PAGE, links))
        assert [r.url for r in kept] == ["http://other/x"]
        assert not scheduler.enqueue_request(kept[0])  # the scheduler still drops it
    finally:
        stop_loops(scheduler)


def test_without_a_memory_of_what_was_sent_the_middleware_is_off(caplog):
    crawler = crawler_with_addon(settings={"DUPEFILTER_LOCAL_CACHE": 0})
    with caplog.at_level(logging.INFO), pytest.raises(NotConfigured) as raised:
        SentLinksMiddleware.from_crawler(crawler)
    # no message for Scrapy to log as a WARNING at every start; said at INFO instead
    assert not raised.value.args
    said = [r for r in caplog.records if "DUPEFILTER_LOCAL_CACHE is 0" in r.getMessage()]
    assert [r.levelname for r in said] == ["INFO"]
