"""What a page says about itself: meta robots, X-Robots-Tag and rel="nofollow",
read as the major crawlers read them."""

from __future__ import annotations

import pytest
from scrapy import Request, Spider
from scrapy.exceptions import NotConfigured
from scrapy.http import HtmlResponse, TextResponse

from extensions.spidermiddlewares.robotsmeta import RobotsMetaMiddleware, header_directives
from extensions.usage import agent_token
from tests.conftest import crawler_with_addon

pytestmark = pytest.mark.unit

AGENT = "MyBot/1.0 (+https://example.com/bot)"


class Site(Spider):
    name = "t"


def middleware(**settings) -> RobotsMetaMiddleware:
    crawler = crawler_with_addon(Site, settings={"USER_AGENT": AGENT, **settings})
    return RobotsMetaMiddleware.from_crawler(crawler)


def page(head: str = "", body: str = "", headers: dict | None = None) -> HtmlResponse:
    html = f"<html><head>{head}</head><body>{body}</body></html>"
    return HtmlResponse("http://a.test/p", body=html.encode(), headers=headers or {})


def output(m: RobotsMetaMiddleware, response, items=None) -> list:
    items = items if items is not None else [{"t": 1}, Request("http://a.test/next")]
    return list(m.process_spider_output(response, items))


def test_the_crawlers_token_is_its_user_agents_first_word():
    assert agent_token(AGENT) == "mybot"
    assert agent_token("Scrapy/2.19 (+https://scrapy.org)") == "scrapy"
    assert agent_token("") == ""


@pytest.mark.parametrize("head", [
    '<meta name="robots" content="noindex, nofollow">',
    "<META NAME='ROBOTS' CONTENT='NoIndex,NoFollow'>",
    '<meta name=" robots " content="  none ">',
    '<meta name="robots" content="noindex"><meta name="robots" content="nofollow">',
    '<meta name="robots" content="index, follow"><meta name="mybot" content="none">',
    '<meta content="nofollow,noindex" name="MyBot">',
])  # fmt: skip
def test_a_page_that_asks_for_noindex_and_nofollow_yields_nothing(head):
    m = middleware()
    assert output(m, page(head)) == []
    assert m.stats.get_value("robots/noindex_pages") == 1
    assert m.stats.get_value("robots/nofollow_pages") == 1
    assert m.stats.get_value("robots/items_dropped") == 1
    assert m.stats.get_value("robots/links_dropped") == 1


@pytest.mark.parametrize("head", [
    "",
    '<meta name="robots" content="index, follow">',
    '<meta name="otherbot" content="noindex, nofollow">',  # another crawler's
    '<meta name="description" content="noindex nofollow">',
    '<meta name="robots" content="max-snippet:-1, noarchive">',
])  # fmt: skip
def test_a_page_that_asks_nothing_of_this_crawler_yields_everything(head):
    m = middleware()
    items = [{"t": 1}, Request("http://a.test/next")]
    assert output(m, page(head), items) == items


def test_nofollow_alone_keeps_the_items_and_noindex_alone_the_links():
    m = middleware()
    got = output(m, page('<meta name="robots" content="nofollow">'))
    assert got == [{"t": 1}]
    got = output(m, page('<meta name="robots" content="noindex">'))
    assert len(got) == 1 and got[0].url == "http://a.test/next"


def test_noindex_flagged_keeps_the_item_marked():
    m = middleware(ROBOTS_META_NOINDEX="flag")
    got = output(m, page('<meta name="robots" content="noindex">'), [{"t": 1}])
    assert got == [{"t": 1, "_noindex": True}]
    assert m.stats.get_value("robots/items_flagged") == 1


@pytest.mark.parametrize(("values", "expected"), [
    ([b"noindex"], {"noindex"}),
    ([b"NoIndex, NOFOLLOW"], {"noindex", "nofollow"}),
    ([b"mybot: noindex"], {"noindex"}),
    ([b"otherbot: noindex, nofollow"], set()),
    ([b"otherbot: noindex", b"mybot: nofollow"], {"nofollow"}),
    ([b"otherbot: noindex, mybot: nofollow"], {"nofollow"}),
    ([b"unavailable_after: 25 Jun 2010 15:00:00 PST"], {"unavailable_after"}),
    ([b"noarchive, MyBot : none"], {"noarchive", "none"}),
])  # fmt: skip
def test_x_robots_tag_applies_to_every_crawler_or_the_one_it_names(values, expected):
    assert header_directives(values, "mybot") == expected


def test_the_header_counts_as_the_meta_does_and_on_any_response():
    m = middleware()
    headers = {"X-Robots-Tag": ["otherbot: noindex", "MyBot: noindex, nofollow"]}
    assert output(m, page(headers=headers)) == []
    pdf = TextResponse("http://a.test/f.pdf", body=b"%PDF", headers={"X-Robots-Tag": "none"})
    assert output(m, pdf) == []


def test_nofollow_links_are_followed_by_default_and_not_by_setting():
    body = (
        '<a href="/a" rel="nofollow">a</a> <a href="/b" rel="ugc NoFollow">b</a>'
        '<a href="/c">c</a> <a href="http://b.test/d" rel="nofollow noopener">d</a>'
    )
    links = [Request(f"http://a.test/{x}") for x in "abc"] + [Request("http://b.test/d")]
    m = middleware(ROBOTS_FOLLOW_NOFOLLOW_LINKS=False)
    got = output(m, page(body=body), [{"t": 1}, *links])
    assert [x.url if isinstance(x, Request) else x for x in got] == [{"t": 1}, "http://a.test/c"]
    assert m.stats.get_value("robots/nofollow_links_dropped") == 3
    assert output(middleware(), page(body=body), links) == links


def test_obey_false_turns_it_off():
    with pytest.raises(NotConfigured):
        middleware(ROBOTS_META_OBEY=False)
