"""A crawl's purpose against what sites say of their content: which statements
refuse which purpose, what becomes of a refused page's items, and a crawl id's
own purpose read from Redis."""

from __future__ import annotations

import pytest
from scrapy import Request, Spider
from scrapy.http import HtmlResponse
from scrapy.settings import Settings

from extensions import config
from extensions.keys import SpiderKeys
from extensions.meta import CRAWL_ID
from extensions.purpose.judge import refused_of
from extensions.purpose.policy import refusal
from extensions.robotscache import robots_state
from extensions.spidermiddlewares.usagesignals import UsageSignalsMiddleware
from extensions.usage import robots_usage
from tests.conftest import crawler_with_addon, scrapy

ROBOTS = b"""User-agent: *
Content-Usage: train-ai=n
Content-Usage: /open/ train-ai=y
Content-Usage: /quiet/ bots=n
Content-Signal: ai-input=no
"""


class Site(Spider):
    name = "purposes"


@pytest.mark.unit
@pytest.mark.parametrize(
    ("usage", "purpose", "refused"),
    [
        ({"train-ai": "n"}, "ai-train", "train-ai=n"),
        ({"bots": "n"}, "ai-train", "bots=n"),  # the broader label's word
        ({"bots": "n"}, "search", "bots=n"),
        ({"bots": "n", "train-ai": "y"}, "ai-train", None),  # the narrower label's over it
        ({"train-genai": "n"}, "ai-train", None),  # a narrower refusal is not the broader's
        ({"ai-train": "no"}, "ai-train", "ai-train=no"),  # Content-Signal's name
        ({"train-ai": "y", "ai-train": "no"}, "ai-train", "ai-train=no"),  # either refuses
        ({"ai-use": "n"}, "ai-input", "ai-use=n"),
        ({"ai-input": "no"}, "ai-input", "ai-input=no"),
        ({"search": "yes", "ai-train": "no"}, "search", None),
        ({"search": "n"}, "search", "search=n"),
        ({}, "search", None),
    ],
)
def test_a_purpose_is_refused_by_its_label_its_broader_labels_or_its_signal(
    usage, purpose, refused
):
    assert refusal(usage, purpose) == refused


@pytest.mark.unit
def test_a_purpose_needs_the_preferences_read():
    problems = config.problems(
        Settings({"CRAWL_PURPOSE": "search", "USAGE_SIGNALS_ENABLED": False})
    )
    assert len(problems) == 1 and "needs USAGE_SIGNALS_ENABLED" in problems[0]


def middleware(redis_url: str, **settings) -> UsageSignalsMiddleware:
    crawler = crawler_with_addon(Site, {"REDIS_URL": redis_url, **settings})
    robots_state(crawler).usage["a.test"] = robots_usage(ROBOTS, "crawler")
    crawler.spider = Site()
    return UsageSignalsMiddleware.from_crawler(crawler)


def outputs(m: UsageSignalsMiddleware, path: str, crawl: str = "") -> list:
    meta = {CRAWL_ID: crawl} if crawl else {}
    response = HtmlResponse(f"http://a.test{path}", body=b"<html></html>",
                            request=Request(f"http://a.test{path}", meta=meta))  # fmt: skip
    return list(m.process_spider_output(response, [{"t": 1}, Request("http://a.test/next")]))


def test_a_refused_pages_items_are_dropped_its_links_followed_and_counted(redis_url):
    m = middleware(redis_url, CRAWL_PURPOSE="ai-train")
    item, link = outputs(m, "/open/page")  # train-ai=y there
    assert item["_usage"] == {"ai-input": "no", "train-ai": "y"} and isinstance(link, Request)
    assert [type(o) for o in outputs(m, "/closed")] == [Request]
    assert [type(o) for o in outputs(m, "/quiet/page")] == [Request]  # bots=n
    refused = refused_of(m.judge.crawler)
    assert refused.hosts == {"a.test": 2} and refused.items_dropped == 2
    assert m.stats.get_value("usage/refused_pages/ai-train") == 2


def test_flagged_items_name_the_statement_that_refused(redis_url):
    m = middleware(redis_url, CRAWL_PURPOSE="ai-input", USAGE_ENFORCE="flag")
    item, _ = outputs(m, "/open/page")
    assert item["_usage_refused"] == "ai-input=no"
    assert m.stats.get_value("usage/items_flagged") == 1


def test_a_crawl_ids_purpose_is_read_from_redis_over_the_setting(redis_url, redis_client):
    keys = SpiderKeys.for_spider(Site.name)
    redis_client.hset(keys.crawl("corpus"), "purpose", "ai-train")
    redis_client.hset(keys.crawl("everything"), "purpose", "none")
    redis_client.hset(keys.crawl("odd"), "purpose", "ads")
    m = middleware(redis_url, CRAWL_PURPOSE="search")
    assert [type(o) for o in outputs(m, "/closed", "corpus")] == [Request]
    assert len(outputs(m, "/closed", "everything")) == 2  # recorded only
    assert len(outputs(m, "/closed")) == 2  # search: nothing refuses it here
    assert len(outputs(m, "/quiet/x", "odd")) == 1  # the setting's, bots=n refuses search
    assert m.stats.get_value("usage/unknown_purpose") == 1


def test_seed_takes_a_purpose_with_a_crawl_id_alone(redis_url, redis_client):
    with_url = ("-s", f"REDIS_URL={redis_url}")
    bad = scrapy("seed", "shop", "--crawl", "c1", "--purpose", "ads", "http://a.test/", *with_url)
    assert bad.returncode == 1 and "--purpose: 'ads' is no purpose" in bad.stderr
    alone = scrapy("seed", "shop", "--purpose", "ai-train", "http://a.test/", *with_url)
    assert alone.returncode == 2 and "go with --crawl ID" in alone.stderr
    assert redis_client.llen("shop:start_urls") == 0
    good = scrapy("seed", "shop", "--crawl", "c1", "--purpose", "ai-train", "http://a.test/",
                  *with_url)  # fmt: skip
    assert good.returncode == 0, good.stderr
    assert redis_client.hget("shop:crawl:c1", "purpose") == b"ai-train"
