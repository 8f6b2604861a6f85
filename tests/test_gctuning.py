"""The collector tuning of a node: thresholds and a frozen start-up heap while a
spider is open, Python's own again once no crawler of the process is open."""

import asyncio
import gc
import weakref

import pytest
from scrapy import Spider
from scrapy.exceptions import NotConfigured
from scrapy.http import HtmlResponse
from scrapy.utils.test import get_crawler

from extensions import gctuning
from extensions.gctuning import GarbageCollectorTuning, ResponseRelease, parse_threshold


@pytest.fixture
def python_defaults():
    """Each test starts and ends with the process's collector as it found it."""
    before = gc.get_threshold()
    gc.unfreeze()
    yield before
    gc.set_threshold(*before)
    gc.unfreeze()
    gctuning._open_crawlers = 0  # a test that failed half-way leaves no crawler open


def tuned(settings: dict | None = None):
    crawler = get_crawler(Spider, settings or {})
    crawler.spider = crawler._create_spider("gc")
    return GarbageCollectorTuning.from_crawler(crawler)


def opened(tuning) -> None:
    tuning.spider_opened(tuning.crawler.spider)


def closed(tuning) -> None:
    tuning.spider_closed(tuning.crawler.spider)


def test_a_spider_open_freezes_the_heap_and_raises_the_threshold(python_defaults):
    tuning = tuned()
    opened(tuning)
    assert gc.get_threshold() == (50_000, 20, 20)
    # Scrapy, Twisted, pytest: all alive since start-up
    assert tuning.crawler.stats.get_value("gc/frozen_objects") > 10_000
    assert gc.get_freeze_count() > 10_000

    closed(tuning)
    assert gc.get_threshold() == python_defaults
    assert gc.get_freeze_count() == 0  # what the crawl left can be collected again
    for generation in range(3):
        assert tuning.crawler.stats.get_value(f"gc/collections/gen{generation}") >= 0


def test_the_last_crawler_of_the_process_to_close_restores_the_collector(python_defaults):
    first = tuned({"GC_THRESHOLD": "30000,15,15"})
    second = tuned({"GC_THRESHOLD": "30000,15,15"})
    opened(first)
    opened(second)
    closed(first)
    assert gc.get_threshold() == (30_000, 15, 15)  # the second still runs
    assert gc.get_freeze_count() > 10_000
    closed(second)
    closed(second)  # a second close changes nothing
    assert gc.get_threshold() == python_defaults
    assert gc.get_freeze_count() == 0


def test_each_half_can_be_turned_off(python_defaults):
    tuning = tuned({"GC_FREEZE": False})
    opened(tuning)
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == (50_000, 20, 20)
    closed(tuning)

    tuning = tuned({"GC_THRESHOLD": ""})
    opened(tuning)
    assert gc.get_threshold() == python_defaults
    assert gc.get_freeze_count() > 10_000
    closed(tuning)
    assert gc.get_freeze_count() == 0

    with pytest.raises(NotConfigured):
        tuned({"GC_THRESHOLD": [], "GC_FREEZE": False})


def test_a_process_with_the_collector_off_is_left_alone(python_defaults):
    gc.disable()
    try:
        with pytest.raises(NotConfigured):
            tuned()
    finally:
        gc.enable()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("50000,20,20", (50_000, 20, 20)),
        (" 700, 10 ,10 ", (700, 10, 10)),
        ([1000, 5, 5], (1000, 5, 5)),
        ("", None),
        ([], None),
        (None, None),
    ],
)
def test_thresholds_are_read_from_a_string_or_a_list(value, expected):
    assert parse_threshold(value) == expected


@pytest.mark.parametrize("value", ["fast", "1,2", "1,2,3,4", "0,10,10", [5, -1, 5], "1.5,2,2"])
def test_a_bad_threshold_is_refused_with_what_it_must_be(value):
    with pytest.raises(ValueError, match=r"must be|at least 1"):
        parse_threshold(value)


def page() -> HtmlResponse:
    body = b"<html><body><a href='/a'>a</a><a href='/b'>b</a></body></html>"
    return HtmlResponse("http://127.0.0.1/p", body=body)


def test_a_parsed_page_is_freed_without_the_collector_once_its_output_is_through():
    release = ResponseRelease()
    response = page()
    links = (response.urljoin(href) for href in response.css("a::attr(href)").getall())
    output = release.process_spider_output(response, links)
    assert next(output) == "http://127.0.0.1/a"
    assert response._cached_selector is not None  # still parsing: kept
    assert list(output) == ["http://127.0.0.1/b"]
    assert response._cached_selector is None
    assert response.css("a::attr(href)").get() == "/a"  # built again when asked

    # the point: without the response <-> selector cycle, reference counting
    # frees the page the moment it is dropped
    response = page()
    response.selector  # noqa: B018 (caches it)
    gone = weakref.ref(response)
    gc.disable()
    try:
        list(release.process_spider_output(response, iter(())))
        del response
        assert gone() is None
    finally:
        gc.enable()


def test_the_async_output_is_released_the_same_way():
    release = ResponseRelease()
    response = page()
    response.selector  # noqa: B018

    async def outputs():
        yield 1
        yield 2

    async def drain():
        return [o async for o in release.process_spider_output_async(response, outputs())]

    assert asyncio.run(drain()) == [1, 2]
    assert response._cached_selector is None
