"""Recrawls: pages fetched again after RECRAWL_AFTER, conditionally, with change detection."""

import json
import re
import urllib.request

from demosite.server import CHANGE_EVERY, CHANGING_PAGES
from tests.conftest import read_items, site_hits
from tools import services

PAGES = {f"/changing/{n}" for n in range(1, CHANGING_PAGES + 1)}


def stats_of(log: str) -> dict[str, int]:
    return {k: int(v) for k, v in re.findall(r"'(recrawl/[a-z_]+)': (\d+)", log)}


def test_pages_come_back_after_their_interval_and_a_304_is_not_parsed_again(
    redis_url, redis_client, nodes, tmp_path
):
    site = services.start_demo_site()
    try:
        redis_client.lpush("site:start_urls", site.url + "/changing/")
        nodes.start("site", redis_url, spider_args={"allow": "/changing/"},
                    RECRAWL_RULES=json.dumps({"/changing/[0-9]": 0.5}),
                    NODE_HEARTBEAT_INTERVAL=0.3, CLOSESPIDER_TIMEOUT=7,
                    MAX_IDLE_TIME_BEFORE_CLOSE=0)  # fmt: skip
        assert nodes.wait(60) == [0], nodes.tail()
        hits = site_hits(site)
        assert hits["/changing/"] == 1  # no rule for the index: fetched once
        fetches = CHANGE_EVERY + 2  # past one change of each page
        assert all(hits[page] >= fetches for page in PAGES), hits
        with urllib.request.urlopen(site.url + "/__not_modified", timeout=10) as answer:
            not_modified = json.load(answer)
        assert all(not_modified.get(page, 0) >= CHANGE_EVERY - 1 for page in PAGES)

        # a 304 is not parsed: items only for the full answers, each a new version
        items = [i["url"].removeprefix(site.url) for i in read_items(tmp_path / "items")]
        for page in PAGES:
            assert items.count(page) == hits[page] - not_modified[page]
        stats = stats_of(nodes.log(0))
        assert stats["recrawl/not_modified"] == sum(not_modified.get(p, 0) for p in PAGES)
        assert stats["recrawl/changed"] >= len(PAGES)  # the version changed under them
        assert stats.get("recrawl/unchanged", 0) == 0  # the site answers 304 when it is
        assert redis_client.zcard("site:due") == len(PAGES)  # each waits for its next turn
    finally:
        site.stop()


def test_an_adaptive_interval_grows_while_a_page_stays_the_same_and_shrinks_when_it_changes():
    from scrapy.utils.test import get_crawler

    from extensions.downloadermiddlewares.recrawl import RecrawlMiddleware

    settings = {"RECRAWL_ADAPTIVE": True, "RECRAWL_MIN": 60, "RECRAWL_MAX": 1000}
    middleware = RecrawlMiddleware(get_crawler(settings_dict=settings))
    first = middleware._next_interval(100, {}, changed=True)
    assert first == 100  # the first fetch takes the page's own interval
    grown = [first]
    for _ in range(8):  # unchanged each time
        grown.append(middleware._next_interval(100, {"interval": grown[-1]}, changed=False))
    assert grown[:3] == [100, 150, 225] and grown[-1] == 1000  # up, capped by RECRAWL_MAX
    assert middleware._next_interval(100, {"interval": 400}, changed=True) == 200
    assert middleware._next_interval(100, {"interval": 90}, changed=True) == 60  # RECRAWL_MIN


def test_a_pages_validators_do_not_follow_its_meta_into_another_pages_request():
    """A spider that copies response.meta into the requests it makes must not send
    the page's ETag for another page (a wrong 304 would hide that page)."""
    from scrapy import Request

    from extensions.downloadermiddlewares.recrawl import RecrawlMiddleware

    state = {"url": "http://a.example/1", "etag": '"v1"', "last_modified": "x"}
    middleware = RecrawlMiddleware.__new__(RecrawlMiddleware)
    same = Request("http://a.example/1", meta={"recrawl": state})
    middleware.process_request(same)
    assert same.headers[b"If-None-Match"] == b'"v1"'
    other = Request("http://a.example/2", meta=dict(same.meta))
    middleware.process_request(other)
    assert b"If-None-Match" not in other.headers and b"If-Modified-Since" not in other.headers


def _keep_for_recrawl(redis_url, pages):
    """Revisit records as nodes leave them: (path, last fetch, due) each."""
    import redis

    from extensions.frontier.frontier import Frontier
    from extensions.keys import SpiderKeys

    server = redis.Redis.from_url(redis_url)
    frontier = Frontier(server, SpiderKeys.for_spider("site"), "test")
    entries = []
    for path, fetched_at, due in pages:
        url = "http://shop.test" + path
        request = {"url": url, "dont_filter": True, "meta": {"recrawl": {
            "url": url, "fetched_at": fetched_at, "interval": 3600}}}  # fmt: skip
        entries.append((f"{len(entries):040x}", "shop.test", due, json.dumps(request).encode()))
    frontier.revisit(entries)
    return frontier


def test_scrapy_recrawl_queues_the_pages_it_selects_now_and_status_shows_what_falls_due(
    redis_url, redis_client
):
    import time

    from tests.conftest import scrapy

    now = time.time()
    day = 86400
    frontier = _keep_for_recrawl(redis_url, [
        ("/old/1", now - 10 * day, now + 3000),   # due within the hour
        ("/old/2", now - 9 * day, now + 5400),    # in the second hour
        ("/new/1", now - 60, now + 30 * day),
        ("/other", now - 20 * day, now + 30 * day),
        ("/past", now - 8 * day, now - 5),        # due already
    ])  # fmt: skip
    redis_client.hset("site:revisit", "f" * 40, b"shop.test\nnot json")  # anyone can write here
    settings = ("-s", f"REDIS_URL={redis_url}")

    status = json.loads(scrapy("status", "site", "--json", *settings).stdout)
    assert (status["recrawl"], status["due"]) == (6, 1)  # records kept, the bad one too
    assert status["due_by_hour"][:2] == [1, 1] and sum(status["due_by_hour"]) == 2
    assert "recrawl: 6 pages kept, 1 due now" in scrapy("status", "site", *settings).stdout

    done = scrapy("recrawl", "site", "--older-than", "7d", "--match", "/old/", *settings)
    assert done.returncode == 0, done.stderr
    assert "2 pages of site made due now; 3 due pages queued" in done.stdout
    assert "skipped 1 unreadable" in done.stdout
    assert frontier.sizes().queued == 3  # the two selected and the one due already
    assert redis_client.zcard("site:due") == 2  # /new/1 and /other keep their date
    again = scrapy("recrawl", "site", "--match", "/old/", *settings)
    assert "0 pages of site made due now; 0 due pages queued" in again.stdout  # queued once

    limited = scrapy("recrawl", "site", "--limit", "1", *settings)
    assert "1 pages of site made due now; 1 due pages queued" in limited.stdout
    assert frontier.sizes().queued == 4

    for bad, said in ((("--older-than", "soon"), "expected a number"),
                      (("--match", "("), "not a regular expression"),
                      (("--limit", "0"), "positive")):  # fmt: skip
        refused = scrapy("recrawl", "site", *bad, *settings)
        assert refused.returncode != 0 and said in refused.stdout + refused.stderr


def test_with_items_as_the_fingerprint_a_page_changes_only_when_its_items_do():
    """A page whose markup changes on every fetch (a clock, an ad) but whose items do
    not is unchanged; the spider's own fetch time is not content."""
    from scrapy import Request, Spider
    from scrapy.http import HtmlResponse
    from scrapy.utils.test import get_crawler

    from extensions.downloadermiddlewares.recrawl import (
        RecrawlItemsMiddleware,
        RecrawlMiddleware,
        pending_revisits,
    )

    class Prices(Spider):
        name = "prices"
        recrawl_fingerprint = "items"
        recrawl_ignore_fields = ("fetched_at",)

    crawler = get_crawler(Prices, {"RECRAWL_AFTER": 60})
    crawler.spider = Prices()
    crawler._apply_settings()
    fetcher = RecrawlMiddleware(crawler)
    hasher = RecrawlItemsMiddleware.from_crawler(crawler)
    url = "http://shop.test/p/1"

    def fetch(state, body, price, fetched_at):
        request = Request(url, meta={"recrawl": state} if state else {})
        response = HtmlResponse(url, body=body, request=request)
        assert fetcher.process_response(request, response) is response
        item = {"url": url, "price": price, "fetched_at": fetched_at}
        assert list(hasher.process_spider_output(response, [item, Request(url + "?x")])) != []
        _, _, _, data = pending_revisits.pop(request)
        return json.loads(data)["meta"]["recrawl"], request.meta["recrawl_changed"]

    state, _ = fetch(None, b"<p>10:00</p>", 5, "t1")
    state, changed = fetch(state, b"<p>10:05</p>", 5, "t2")
    assert not changed  # new markup, same items
    state, changed = fetch(state, b"<p>10:10</p>", 6, "t3")
    assert changed and state["changed_at"] == state["fetched_at"]
    stats = crawler.stats.get_stats()
    assert (stats["recrawl/unchanged"], stats["recrawl/changed"]) == (1, 1)

    # the callback failed before its items were all seen: settled with what was seen
    request = Request(url, meta={"recrawl": state})
    fetcher.process_response(request, HtmlResponse(url, body=b"x", request=request))
    settle = pending_revisits.get(request)
    assert callable(settle) and settle() is not None
