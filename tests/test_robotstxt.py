"""robots.txt holds whatever state a node starts in: no disallowed page is ever
fetched, also when a node starts with many requests of a host at once (a fresh
node, or one taking over a dead node's leases) and when robots.txt itself fails."""

import urllib.request

from demosite import catalog
from tests.conftest import site_hits
from tests.helpers import run_without_waiting, wait_for

PRODUCTS = catalog.product_ids("books")[:12]


def seed(redis_client, site) -> None:
    urls = [site.url + f"/private/{n}" for n in range(12)]
    urls += [site.url + f"/product/{n}" for n in PRODUCTS]
    # interleaved, so the first batch a node leases holds both kinds
    mixed = [u for pair in zip(urls[:12], urls[12:], strict=True) for u in pair]
    redis_client.rpush("site:start_urls", *mixed)


def test_a_node_that_starts_with_many_requests_of_a_host_refuses_every_disallowed_one(
    redis_url, redis_client, demo_site, nodes
):
    seed(redis_client, demo_site)
    nodes.start("site", redis_url, spider_args={"allow": "/nowhere/"}, MAX_IDLE_TIME_BEFORE_CLOSE=2)
    assert nodes.wait(120) == [0], nodes.tail()
    hits = site_hits(demo_site)
    assert not [path for path in hits if path.startswith("/private/")], hits
    assert {f"/product/{n}" for n in PRODUCTS} <= set(hits)
    assert nodes.stat(0, "robotstxt/forbidden") == 12
    assert nodes.stat(0, "robotstxt/request_count") == 1


def test_a_robots_txt_that_answers_503_holds_its_host_until_it_can_be_read(
    redis_url, redis_client, demo_site, nodes
):
    def post(query: str) -> None:
        urllib.request.urlopen(
            urllib.request.Request(demo_site.url + "/__down?" + query, method="POST"), timeout=10
        ).close()

    post("path=/robots.txt")
    seed(redis_client, demo_site)
    nodes.start("site", redis_url, spider_args={"allow": "/nowhere/"},
                MAX_IDLE_TIME_BEFORE_CLOSE=3, ROBOTSTXT_RETRY_DELAY=1)  # fmt: skip
    wait_for(lambda: site_hits(demo_site).get("/robots.txt", 0) >= 2, 60, "robots.txt asked again")
    assert set(site_hits(demo_site)) == {"/robots.txt"}, "a page went out before robots.txt"
    post("path=/robots.txt&up=1")
    assert nodes.wait(120) == [0], nodes.tail()
    hits = site_hits(demo_site)
    assert not [path for path in hits if path.startswith("/private/")], hits
    assert {path: n for path, n in hits.items() if path.startswith("/product/")} == {
        f"/product/{n}": 1 for n in PRODUCTS
    }
    assert nodes.stat(0, "robotstxt/unavailable") >= 2
    assert nodes.stat(0, "robotstxt/waited") >= 24
    assert nodes.stat(0, "robotstxt/forbidden") == 12
    assert redis_client.llen("site:dlq") == 0


def test_the_clusters_robots_txt_is_claimed_read_and_a_bad_record_replaced(redis_client):
    from scrapy.settings import Settings
    from scrapy.statscollectors import MemoryStatsCollector
    from scrapy.utils.test import get_crawler

    from extensions import defaults
    from extensions.keys import SpiderKeys
    from extensions.robotscache import PENDING, SharedRobots

    stats = MemoryStatsCollector(get_crawler())
    settings = Settings({"ROBOTSTXT_CACHE_TTL": defaults.ROBOTSTXT_CACHE_TTL})
    shared = SharedRobots(redis_client, SpiderKeys.for_spider("site"), stats, settings)

    def claim(netloc: str):
        return run_without_waiting(shared.body_or_claim(netloc))

    assert claim("a.test:80") is None  # no one has it: ours to fetch
    assert redis_client.get("site:robots:a.test:80") == PENDING
    shared.keep("a.test:80", b"User-agent: *\nDisallow: /private/\n")
    assert claim("a.test:80") == b"User-agent: *\nDisallow: /private/\n"
    assert 0 < redis_client.ttl("site:robots:a.test:80") <= 86400
    redis_client.set("site:robots:b.test:80", b"<html>not a record</html>")
    assert claim("b.test:80") is None  # replaced by this node's claim
    assert stats.get_value("robotstxt/bad_records") == 1
    shared.let_go("b.test:80")  # could not be had: the next node asks again
    assert not redis_client.exists("site:robots:b.test:80")
