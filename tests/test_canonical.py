"""rel="canonical": where a page says it is (its head or a Link header), what
it may name, and what a page naming another URL yields."""

from __future__ import annotations

import pytest
from scrapy import Request, Spider
from scrapy.http import HtmlResponse, TextResponse

from extensions.meta import CRAWL_ID, SEEN_ONLY
from extensions.spidermiddlewares.canonical import CanonicalMiddleware
from tests.conftest import crawler_with_addon

pytestmark = pytest.mark.unit


class Shop(Spider):
    name = "t"


def page(url: str, head: str = "", headers: dict | None = None, status: int = 200, **meta):
    body = f"<html><head><title>x</title>{head}</head><body><p>x</p></body></html>".encode()
    return HtmlResponse(url, body=body, headers=headers, status=status,
                        request=Request(url, meta=meta))  # fmt: skip


@pytest.fixture
def middleware():
    return CanonicalMiddleware.from_crawler(crawler_with_addon(Shop))


@pytest.mark.parametrize(
    ("head", "headers", "expected"),
    [
        ("<link rel='canonical' href='/item?id=3&b=1'>", None, "http://s.test/item?b=1&id=3"),
        ('<LINK REL="Canonical" HREF="https://s.test/item">', None, "https://s.test/item"),
        ("<link rel='alternate canonical' href='/b'>", None, "http://s.test/b"),
        ("", {"Link": '<http://s.test/doc>; rel="canonical"'}, "http://s.test/doc"),
        ("", {"Link": '<http://s.test/p2>; rel="next", </c>; rel=canonical'}, "http://s.test/c"),
        # the header wins over the page, as it comes first
        ("<link rel='canonical' href='/b'>", {"Link": "</h>; rel=canonical"}, "http://s.test/h"),
        # another subdomain of the site may be its canonical
        ("<link rel='canonical' href='https://www.s.test/a'>", None, "https://www.s.test/a"),
    ],
)
def test_a_canonical_is_read_from_the_head_or_a_link_header(middleware, head, headers, expected):
    assert middleware.canonical_of(page("http://s.test/a?utm_source=x", head, headers)) == expected


@pytest.mark.parametrize(
    ("head", "stat"),
    [
        ("<link rel='canonical' href='http://elsewhere.test/a'>", "canonical/other_site"),
        ("<link rel='canonical' href='http://[bad/a'>", "canonical/malformed"),
        ("<link rel='canonical' href='ftp://s.test/a'>", "canonical/malformed"),
        ("<link rel='canonical' href='/a#top'>", "canonical/self"),  # itself once normalized
        ("<link rel='stylesheet' href='/a.css'>", None),
    ],
)
def test_a_canonical_a_page_may_not_name_is_ignored_and_counted(middleware, head, stat):
    assert middleware.canonical_of(page("http://s.test/a", head)) is None
    counted = {k: v for k, v in middleware.stats.get_stats().items() if k.startswith("canonical/")}
    assert counted == ({stat: 1} if stat else {})


def test_a_page_naming_another_url_marks_it_seen_and_records_it_on_its_items(middleware):
    response = page("http://s.test/amp/3", "<link rel='canonical' href='/item/3'>", crawl_id="c1")
    out = list(
        middleware.process_spider_output(response, [{"title": "x"}, Request("http://s.test/x")])
    )
    seen, item, link = out
    assert seen.url == "http://s.test/item/3" and seen.meta[SEEN_ONLY] is True
    assert seen.meta[CRAWL_ID] == "c1"
    assert item == {"title": "x", "canonical": "http://s.test/item/3"}
    assert link.url == "http://s.test/x" and SEEN_ONLY not in link.meta
    # an error page says nothing of where the page is; a non-HTML answer only by header
    assert middleware.canonical_of(page("http://s.test/amp/4", "<link rel='canonical' href='/i'>",
                                        status=404)) is None  # fmt: skip
    text = TextResponse("http://s.test/d.txt", body=b"<link rel='canonical' href='/i'>")
    assert middleware.canonical_of(text) is None


def test_off_by_setting():
    from scrapy.exceptions import NotConfigured

    with pytest.raises(NotConfigured):
        CanonicalMiddleware.from_crawler(crawler_with_addon(Shop, {"CANONICAL_ENABLED": False}))
