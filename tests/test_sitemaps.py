"""Sitemaps across the cluster: DistributedSitemapSpider and `scrapy seed --sitemap`."""

import json

import pytest
from scrapy import Request

from demosite import catalog
from demosite.server import ARCHIVE_PAGES
from extensions.exceptions import InvalidStartURL
from extensions.frontier.start_urls import parse_entry
from servers.clients import redis_at
from tests.conftest import crawler_with_addon, read_items, scrapy
from tests.helpers import page_hits, project_scrapy


def test_two_nodes_read_the_sitemaps_from_robots_txt_and_fetch_each_page_once(
    redis_url, redis_client, demo_site, nodes, tmp_path
):
    seeded = scrapy("seed", "books_sitemap", "--sitemap", demo_site.url + "/robots.txt",
                    "-s", f"REDIS_URL={redis_url}",
                    "-s", "SPIDER_MODULES=tests.spiders")  # fmt: skip
    assert seeded.returncode == 0, seeded.stderr
    entry = json.loads(redis_client.lrange("books_sitemap:start_urls", 0, -1)[0])
    assert entry == {"url": demo_site.url + "/robots.txt", "sitemap": True}
    for node in ("n1", "n2"):
        nodes.start("books_sitemap", redis_url, NODE_ID=node, MAX_IDLE_TIME_BEFORE_CLOSE=2,
                    SPIDER_MODULES="tests.spiders")  # fmt: skip
    assert nodes.wait(120) == [0, 0], nodes.tail()

    books = {f"/product/{i}" for i in catalog.product_ids("books")}
    stored = [item["url"].removeprefix(demo_site.url) for item in read_items(tmp_path / "items")]
    assert sorted(stored) == sorted(books)  # every book once, nothing else
    hits = page_hits(demo_site)
    for sitemap in ("/sitemap.xml", "/sitemap-products-books.xml"):
        assert hits[sitemap] == 1, sitemap  # once for the whole cluster
    assert not [path for path in hits if "products-" in path and "books" not in path]
    assert all(hits[path] == 1 for path in books)


def test_the_site_spider_reads_a_sitemap_whose_pages_no_page_links_to(
    redis_url, redis_client, demo_site, nodes, tmp_path
):
    sitemap = demo_site.url + "/sitemap-archive.xml"
    seeded = scrapy("seed", "site", "--sitemap", sitemap, "-s", f"REDIS_URL={redis_url}")
    assert seeded.returncode == 0, seeded.stderr
    for node in ("n1", "n2"):
        nodes.start("site", redis_url, NODE_ID=node, MAX_IDLE_TIME_BEFORE_CLOSE=2)
    assert nodes.wait(120) == [0, 0], nodes.tail()

    archive = {f"/archive/{n}" for n in range(1, ARCHIVE_PAGES + 1)}
    stored = [item["url"].removeprefix(demo_site.url) for item in read_items(tmp_path / "items")]
    assert sorted(stored) == sorted(archive)  # each page once, from either node
    hits = page_hits(demo_site)
    assert hits == {**dict.fromkeys(archive, 1), "/sitemap-archive.xml": 1}


def test_any_distributed_spider_reads_the_sitemaps_of_robots_txt_when_asked(
    redis_url, demo_site, nodes, tmp_path
):
    """SITEMAP_FROM_ROBOTS: the robots.txt of the start page's host is read for
    its Sitemap: lines; the pages go to the spider's sitemap_rules."""
    nodes.start("books_robots", redis_url, spider_args={"start": demo_site.url + "/about"},
                SPIDER_MODULES="tests.spiders", SITEMAP_FROM_ROBOTS=True,
                MAX_IDLE_TIME_BEFORE_CLOSE=2)  # fmt: skip
    assert nodes.wait(120) == [0], nodes.tail()
    items = {
        item["url"].removeprefix(demo_site.url): item["kind"]
        for item in read_items(tmp_path / "items")
    }
    books = {f"/product/{i}" for i in catalog.product_ids("books")}
    assert items == {"/about": "page", **dict.fromkeys(books, "product")}
    hits = page_hits(demo_site)
    assert hits["/sitemap.xml"] == hits["/sitemap-products-books.xml"] == 1
    assert all(hits[path] == 1 for path in books)


def test_a_sitemap_entry_is_refused_where_no_spider_reads_sitemaps(redis_url, redis_client):
    """scrapy-redis's RedisSpider, left as it is, reads its start URLs itself."""
    result = project_scrapy("seed", "books", "--sitemap", "http://example.com/sitemap.xml",
                            "-s", f"REDIS_URL={redis_url}", switched=True)  # fmt: skip
    assert result.returncode != 0
    assert "does not read sitemaps (base it on DistributedSpider" in result.stderr
    assert redis_client.llen("books:start_urls") == 0
    entry = parse_entry(json.dumps({"url": "http://example.com/s.xml", "sitemap": True}))
    assert entry.sitemap and entry.url == "http://example.com/s.xml"
    with pytest.raises(InvalidStartURL, match="'sitemap' must be true or false"):
        parse_entry(json.dumps({"url": "http://example.com/s.xml", "sitemap": "yes"}))


def test_a_sitemaps_lastmod_fetches_an_edited_page_at_once_and_puts_the_others_off(
    redis_url, redis_client, demo_site, nodes
):
    """The books' sitemap is read again every half second; the pages are kept for a
    recrawl in an hour. A page the shop edits is fetched again at once; the others,
    listed as unchanged, have their recrawl put off."""
    import urllib.request

    from extensions.recrawl.records import revisit_page
    from tests.helpers import wait_for

    entry = {"url": demo_site.url + "/robots.txt", "sitemap": True}
    redis_client.lpush("books_sitemap:start_urls", json.dumps(entry))
    rules = {"sitemap-products-books": 0.5, "/product/": 3600}
    nodes.start("books_sitemap", redis_url, NODE_ID="n1", SPIDER_MODULES="tests.spiders",
                RECRAWL_RULES=json.dumps(rules), NODE_HEARTBEAT_INTERVAL=0.3,
                MAX_IDLE_TIME_BEFORE_CLOSE=0, CLOSESPIDER_TIMEOUT=20)  # fmt: skip
    books = {f"/product/{i}" for i in catalog.product_ids("books")}
    wait_for(lambda: books <= set(page_hits(demo_site)), 30, "every book fetched")
    edited = sorted(books)[3]
    request = urllib.request.Request(demo_site.url + "/__edit?path=" + edited, method="POST")
    urllib.request.urlopen(request, timeout=10).close()
    wait_for(lambda: page_hits(demo_site).get(edited) == 2, 30, "the edited page fetched again")
    assert nodes.wait(60) == [0], nodes.tail()

    hits = page_hits(demo_site)
    assert hits[edited] == 2 and all(hits[page] == 1 for page in books - {edited})
    assert hits["/sitemap-products-books.xml"] >= 3  # read again and again
    assert nodes.stat(0, "recrawl/lastmod_changed") == 1
    put_off = 0
    for fingerprint, record in redis_client.hgetall("books_sitemap:revisit").items():
        url, fetched_at = revisit_page(record)
        if url.removeprefix(demo_site.url) in books:
            due = redis_client.zscore("books_sitemap:due", fingerprint) / 1000
            put_off += due > fetched_at + 3600 + 0.2  # a later read of the sitemap moved it
    assert put_off >= len(books) - 1


@pytest.mark.parametrize("store", ["redis", "mongo"])
def test_lastmod_moves_a_changed_page_to_now_and_an_unchanged_one_an_interval_out(
    store, redis_url, mongo_db
):
    import time

    from extensions.frontier.frontier import Frontier
    from extensions.keys import SpiderKeys
    from extensions.recrawl.redisstore import RecrawlStore
    from extensions.recrawl.statusstore import MongoStatusStore

    frontier = RecrawlStore(Frontier(redis_at(redis_url), SpiderKeys.for_spider("s"), "n1"))
    uri, database, _ = mongo_db
    target = frontier if store == "redis" else MongoStatusStore(uri, database, "s_status")
    now, hour = time.time(), 3600
    entries = []
    for n in range(4):
        url = f"http://shop.test/p/{n}"
        request = {"url": url, "meta": {"recrawl": {"url": url, "fetched_at": now - hour,
                                                    "interval": 2 * hour}}}  # fmt: skip
        entries.append((f"{n:040x}", "shop.test", now + hour, json.dumps(request).encode()))
    (frontier.revisit if store == "redis" else target.write)(entries)

    def due(n: int) -> float:
        if store == "redis":
            return frontier.server.zscore("s:due", entries[n][0]) / 1000
        return target.collection.find_one({"_id": entries[n][0]})["due"]

    said = [
        (entries[0][0], "shop.test", now - 60),  # edited since the last fetch
        (entries[1][0], "shop.test", now - 2 * hour),  # not since
        (entries[2][0], "shop.test", now - 2 * hour),
        ("f" * 40, "shop.test", now),
    ]  # fmt: skip  (never fetched: not kept)
    assert target.lastmod(said) == (1, 2)
    assert due(0) <= time.time()
    assert all(now + 2 * hour - 1 <= due(n) <= time.time() + 2 * hour for n in (1, 2))
    assert abs(due(3) - (now + hour)) < 0.01  # not in the sitemap: unchanged

    # a page queued meanwhile (no date: it is being fetched) is left alone
    if store == "redis":
        frontier.server.zrem("s:due", entries[0][0])
    else:
        target.collection.update_one({"_id": entries[0][0]}, {"$set": {"due": None}})
    assert target.lastmod(said[:1]) == (0, 0)
    if store == "redis":
        assert frontier.server.zscore("s:due", entries[0][0]) is None
    else:
        assert target.collection.find_one({"_id": entries[0][0]})["due"] is None


def test_a_lastmod_that_does_not_parse_or_lies_ahead_moves_nothing(redis_url):
    import datetime as dt
    import time

    from extensions.frontier.frontier import Frontier
    from extensions.keys import SpiderKeys
    from extensions.recrawl.redisstore import RecrawlStore
    from tests.spiders import BooksSitemapSpider

    crawler = crawler_with_addon(
        BooksSitemapSpider, {"REDIS_URL": redis_url, "RECRAWL_STORE": "redis"}
    )
    spider = BooksSitemapSpider.from_crawler(crawler)
    crawler.spider = spider
    keys = SpiderKeys.for_spider("books_sitemap")
    frontier = RecrawlStore(Frontier(redis_at(redis_url), keys, "t"))
    now = time.time()
    urls = [f"http://shop.test/product/{n}" for n in range(3)]
    entries = []
    for url in urls:
        request = {"url": url, "meta": {"recrawl": {"url": url, "fetched_at": now - 3600,
                                                    "interval": 86400}}}  # fmt: skip
        fingerprint = crawler.request_fingerprinter.fingerprint(Request(url)).hex()
        entries.append((fingerprint, "shop.test", now + 86400, json.dumps(request).encode()))
    frontier.revisit(entries)

    edited = dt.datetime.now(dt.UTC).isoformat()
    spider._apply_lastmods([(urls[0], "yesterday"), (urls[1], "2999-01-01"),
                            (urls[2], edited), ("no url", edited), (None, edited)])  # fmt: skip
    stats = crawler.stats.get_stats()
    assert stats["recrawl/lastmod_unreadable"] == 4
    assert stats["recrawl/lastmod_changed"] == 1  # the one page really edited
    due = [frontier.server.zscore("books_sitemap:due", fp) / 1000 for fp, *_ in entries]
    assert due[0] > now + 3600 and due[1] > now + 3600 and due[2] <= time.time()


def test_a_plain_distributed_spider_reads_a_urlset_with_its_rules_and_lastmod(redis_url):
    """The sitemap reading every distributed spider shares: pages routed by
    sitemap_rules (the others dropped, as in Scrapy), lastmod applied to a page
    kept for a recrawl."""
    import time

    from scrapy.http import XmlResponse

    from extensions.frontier.frontier import Frontier
    from extensions.keys import SpiderKeys
    from extensions.recrawl.redisstore import RecrawlStore
    from tests.spiders import BooksFromRobotsSpider

    crawler = crawler_with_addon(
        BooksFromRobotsSpider, {"REDIS_URL": redis_url, "RECRAWL_STORE": "redis"}
    )
    spider = BooksFromRobotsSpider.from_crawler(crawler, start="http://shop.test/")
    crawler.spider = spider
    now = time.time()
    kept = "http://shop.test/product/1"
    frontier = RecrawlStore(Frontier(redis_at(redis_url), SpiderKeys.for_spider(spider.name), "t"))
    fingerprint = crawler.request_fingerprinter.fingerprint(Request(kept)).hex()
    record = {"url": kept, "meta": {"recrawl": {"url": kept, "fetched_at": now - 3600,
                                                "interval": 86400}}}  # fmt: skip
    frontier.revisit([(fingerprint, "shop.test", now + 86400, json.dumps(record).encode())])

    body = (
        '<?xml version="1.0" encoding="UTF-8"?>'
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f"<url><loc>{kept}</loc><lastmod>{time.strftime('%Y-%m-%dT%H:%M:%S+00:00', time.gmtime())}"
        "</lastmod></url>"
        "<url><loc>no scheme /product/3</loc></url>"  # anyone writes sitemaps
        "<url><loc>http://shop.test/category/books</loc></url>"
        "<url><loc>http://shop.test/product/2</loc></url></urlset>"
    )
    sitemap = XmlResponse("http://shop.test/sitemap.xml", body=body.encode())
    requests = list(spider._parse_sitemap(sitemap))
    # the bad loc is skipped, not the end of the sitemap; the category has no rule
    assert [(r.url, r.callback) for r in requests] == [
        (kept, spider.parse_product),
        ("http://shop.test/product/2", spider.parse_product),
    ]
    assert crawler.stats.get_value("sitemaps/bad_loc") == 1
    assert crawler.stats.get_value("recrawl/lastmod_changed") == 1
    assert frontier.server.zscore(f"{spider.name}:due", fingerprint) / 1000 <= time.time()
