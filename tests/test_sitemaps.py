"""Sitemaps across the cluster: DistributedSitemapSpider and `scrapy seed --sitemap`."""

import json

import pytest

from demosite import catalog
from extensions.exceptions import InvalidStartURL
from extensions.frontier.start_urls import parse_entry
from tests.conftest import read_items, scrapy
from tests.test_scheduler import page_hits


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


def test_a_sitemap_entry_is_refused_where_no_spider_reads_sitemaps(redis_url, redis_client):
    result = scrapy("seed", "shop", "--sitemap", "http://example.com/sitemap.xml",
                    "-s", f"REDIS_URL={redis_url}")  # fmt: skip
    assert result.returncode != 0
    assert "does not read sitemaps" in result.stderr
    assert redis_client.llen("shop:start_urls") == 0
    entry = parse_entry(json.dumps({"url": "http://example.com/s.xml", "sitemap": True}))
    assert entry.sitemap and entry.url == "http://example.com/s.xml"
    with pytest.raises(InvalidStartURL, match="'sitemap' must be true or false"):
        parse_entry(json.dumps({"url": "http://example.com/s.xml", "sitemap": "yes"}))
