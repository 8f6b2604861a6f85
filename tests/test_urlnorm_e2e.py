"""One page, one URL, in a real crawl: the demo site's /variants/ pages are each
linked under five URLs (query orders, tracking parameters, session ids in path
and query, fragments). With the project's defaults a node fetches and stores
each page once; with the chain off, as Scrapy's fingerprint alone would, it
fetches the variants too."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from demosite.variants import ITEMS, page_path
from tests.conftest import read_items, scrapy, site_hits

SETTINGS = {"MAX_IDLE_TIME_BEFORE_CLOSE": 3}  # the rest are the project's defaults
PAGES = {page_path(n) for n in range(1, ITEMS + 1)}


def crawl_variants(redis_url, redis_client, nodes, demo_site, **settings) -> dict[str, int]:
    redis_client.lpush("site:start_urls", demo_site.url + "/variants/")
    nodes.start("site", redis_url, spider_args={"allow": "/variants/"}, **SETTINGS, **settings)
    assert nodes.wait(120) == [0], nodes.tail()
    return {
        path: n for path, n in site_hits(demo_site).items() if path.startswith("/variants/item")
    }


def test_each_page_under_many_urls_is_fetched_and_stored_once(
    redis_url, redis_client, nodes, demo_site, tmp_path
):
    fetched = crawl_variants(redis_url, redis_client, nodes, demo_site)
    assert fetched == dict.fromkeys(PAGES, 1)
    stored = [item["url"].removeprefix(demo_site.url) for item in read_items(tmp_path / "items")]
    assert sorted(p for p in stored if p != "/variants/") == sorted(PAGES)
    assert nodes.stat(0, "urlnorm/changed/TrackingParameters") > 0
    assert nodes.stat(0, "urlnorm/changed/SessionId") > 0
    assert nodes.stat(0, "urlnorm/changed/SortedQuery") > 0
    # the command says the same of a URL as the crawl did
    shown = scrapy("normalize", demo_site.url + "/variants/item;jsessionid=S1X?id=3&colour=red")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[0] == demo_site.url + page_path(3)


def test_with_the_chain_off_the_variants_are_fetched_as_pages_of_their_own(
    redis_url, redis_client, nodes, demo_site
):
    fetched = crawl_variants(redis_url, redis_client, nodes, demo_site, URL_NORMALIZE_ENABLED=False)
    ids = {parse_qs(urlsplit(path).query)["id"][0] for path in fetched}
    assert ids == {str(n) for n in range(1, ITEMS + 1)}
    # Scrapy's fingerprint sorts the query and drops the fragment: the tracking
    # parameters and session ids still make pages of their own
    assert sum(fetched.values()) >= 3 * ITEMS, sum(fetched.values())
