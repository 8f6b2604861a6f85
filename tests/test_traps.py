"""Crawler traps and host budgets: what would eat a crawl stops at its threshold,
with the reason counted."""

import json

from scrapy import Request
from scrapy.http import HtmlResponse

from extensions.frontier.traps import TrapDetector, TrapRules, shape
from extensions.spidermiddlewares.traps import TrapMiddleware
from tests.conftest import scrapy, site_hits
from tests.test_scheduler_unit import open_scheduler, stop_loops


def test_chains_of_pages_that_differ_only_in_numbers_are_counted_and_stopped():
    detector = TrapDetector(TrapRules(chain_limit=3))
    day = "http://s/trap/calendar/2026-01-0{}"
    assert shape(day.format(1)) == shape(day.format(2))
    chain = 0
    for n in range(1, 6):
        chain = detector.chain_of(day.format(n + 1), day.format(n), chain)
    assert chain == 5 and detector.reason(day.format(6), chain) == "chain"
    # a product found from a category page starts no chain
    assert detector.chain_of("http://s/product/7", "http://s/category/books?page=2", 9) == 0


def test_repeating_paths_long_urls_and_endless_query_strings_are_traps():
    detector = TrapDetector(TrapRules(url_length=100, query_variants=3))
    assert detector.reason("http://s/trap/loop/a/b/a/b/a/", 0) == "repeating_path"
    assert detector.reason("http://s/news/2024/01/01/01/story", 0) is None  # short numbers
    assert detector.reason("http://s/" + "x" * 100, 0) == "url_length"
    assert [detector.reason(f"http://s/search?q={n}", 0) for n in range(5)] == [
        None, None, None, "query_variants", "query_variants",
    ]  # fmt: skip
    assert detector.reason("http://s/search?q=1", 0) == "query_variants"  # the path is a trap
    assert detector.reason("http://other/search?q=9", 0) is None  # per host


def test_a_link_the_node_sent_before_goes_unchecked_to_the_scheduler_which_drops_it(redis_url):
    scheduler = open_scheduler(redis_url)
    try:
        crawler = scheduler.node.crawler
        traps = TrapMiddleware.from_crawler(crawler)
        looping = "http://s/a/b/a/b/a/b/"  # a repeating path: a trap when the page links it
        assert scheduler.enqueue_request(Request(looping))  # queued by other means
        page = HtmlResponse("http://s/", body=b"<html></html>", request=Request("http://s/"))
        links = [Request(looping), Request("http://s/c/d/c/d/c/d/"), Request("http://s/ok")]
        kept = list(traps.process_spider_output(page, links))
        assert [r.url for r in kept] == [looping, "http://s/ok"]
        assert crawler.stats.get_value("traps/dropped/repeating_path") == 1
        assert not scheduler.enqueue_request(kept[0])  # sent before: dropped there
        assert scheduler.enqueue_request(kept[1])
    finally:
        stop_loops(scheduler)


def test_the_site_spider_stops_every_trap_with_no_setting(
    redis_url, redis_client, demo_site, nodes
):
    redis_client.lpush("site:start_urls", demo_site.url + "/trap/")
    nodes.start("site", redis_url, MAX_IDLE_TIME_BEFORE_CLOSE=2, TRAP_QUERY_VARIANTS=40)
    assert nodes.wait(180) == [0], nodes.tail()
    hits = site_hits(demo_site)
    calendar = [path for path in hits if path.startswith("/trap/calendar/")]
    # the calendar runs both ways from its first day; each way stops at the chain limit
    assert 300 <= len(calendar) <= 2 * 200 + 1, len(calendar)
    loop = [path for path in hits if path.startswith("/trap/loop/")]
    assert 5 <= len(loop) <= 40 and all(p.count("/a/") < 3 for p in loop)
    search = [path for path in hits if path.startswith("/trap/search")]
    assert len(search) <= 40 + 1
    log = nodes.log(0)
    for reason in ("chain", "repeating_path", "query_variants"):
        assert nodes.stat(0, f"traps/dropped/{reason}") > 0, reason
    assert "look like a crawler trap (chain)" in log
    status = scrapy("status", "site", "--hosts", "--json", "-s", f"REDIS_URL={redis_url}")
    assert status.returncode == 0, status.stderr
    [host] = json.loads(status.stdout)["hosts"]
    assert host["host"] == "127.0.0.1"
    assert host["dropped"]["chain"] == nodes.stat(0, "traps/dropped/chain")
    assert host["fetched"] == sum(n for path, n in hits.items() if path != "/robots.txt")


def test_a_host_budget_holds_exactly_across_three_nodes(redis_url, redis_client, demo_site, nodes):
    redis_client.lpush("site:start_urls", demo_site.url + "/")
    for _ in range(3):
        nodes.start("site", redis_url, MAX_IDLE_TIME_BEFORE_CLOSE=2, HOST_PAGE_BUDGET=60)
    assert nodes.wait(180) == [0, 0, 0], nodes.tail()
    hits = site_hits(demo_site)
    fetched = sum(n for path, n in hits.items() if path != "/robots.txt")
    # the budget counts requests given to the host: those robots.txt forbids among them
    forbidden = nodes.total("robotstxt/forbidden")
    assert fetched + forbidden == 60
    dropped = nodes.total("frontier/dropped/budget")
    assert dropped > 0
    host = redis_client.hgetall("site:host:127.0.0.1")
    assert int(host[b"dropped:budget"]) == dropped
    assert int(host[b"accepted"]) == 60 + dropped  # every request offered was counted
    assert any("HOST_PAGE_BUDGET of 60" in nodes.log(i) for i in range(3))
