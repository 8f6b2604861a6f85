"""One page, one URL, in a real crawl: the demo site's /variants/ pages are each
linked under five URLs (query orders, tracking parameters, session ids in path
and query, fragments) and a print view no rule knows, and say when they were
generated. With the normalizer chain (a default) and content duplicates (on by
setting) a node fetches each page once under its URLs (its print view too) and
stores it once; with the chain off the variants are fetched, and only their
content tells them apart."""

from __future__ import annotations

import json
import urllib.request
from collections import Counter

from demosite.variants import ITEMS, LIST_PAGES, SORTS, STORIES, STORY_VIEWS, page_path
from servers import services
from tests.conftest import read_items, scrapy, site_hits

SETTINGS = {"MAX_IDLE_TIME_BEFORE_CLOSE": 3}  # the rest are the project's defaults
PAGES = {page_path(n) for n in range(1, ITEMS + 1)}
TITLES = {f"Item {n}" for n in range(1, ITEMS + 1)}


def crawl_variants(
    redis_url, redis_client, nodes, demo_site, *more_starts: str, **settings
) -> dict[str, int]:
    starts = [demo_site.url + path for path in ("/variants/", *more_starts)]
    redis_client.lpush("site:start_urls", *starts)
    nodes.start("site", redis_url, spider_args={"allow": "/variants/"}, **SETTINGS, **settings)
    assert nodes.wait(120) == [0], nodes.tail()
    hits = site_hits(demo_site)
    return {
        path: n
        for path, n in hits.items()
        if path.startswith("/variants/") and path not in ("/variants/", *more_starts)
    }


def test_each_page_under_many_urls_is_fetched_and_stored_once(
    redis_url, redis_client, nodes, demo_site, tmp_path
):
    fetched = crawl_variants(redis_url, redis_client, nodes, demo_site, "/variants/stories/",
                             "/variants/moved/", CONTENT_DUPLICATES="drop")  # fmt: skip
    prints = {f"/variants/print/{n}" for n in range(1, ITEMS + 1)}
    views = {f"/variants/story/{n}?from={v}" for n in range(1, STORIES + 1)
             for v in range(1, STORY_VIEWS + 1)}  # fmt: skip
    # (the index under /variants/index.html too: the same content, no item). An old
    # URL is fetched once, and the page it redirects to is not fetched again; a
    # redirect loop ends at the first URL seen again
    old = {f"/variants/old/{n}" for n in range(1, ITEMS + 1)} | {
        "/variants/loop/a",
        "/variants/loop/b",
    }
    expected = PAGES | prints | views | old | {"/variants/index.html"}
    assert fetched == dict.fromkeys(expected, 1)
    items = [item for item in read_items(tmp_path / "items")
             if item["title"] not in ("Variants", "Stories", "Moved")]  # fmt: skip
    stories = [item for item in items if item["title"].startswith("Story")]
    items = [item for item in items if not item["title"].startswith("Story")]
    # a print view has its page's content (its time aside): no item, no links followed
    assert sorted(item["url"].removeprefix(demo_site.url) for item in items) == sorted(PAGES)
    # a story's views differ in a word: near duplicates, each marked (a default) with
    # a view of its story fetched before it. SimHash puts one word 0 to 4 bits
    # away on these pages: a view more than 3 from the story's first is a page of
    # its own; every story has a view within 3 of another
    assert len(stories) == len(views)  # every view stored
    by_url = {item["url"]: item for item in stories}
    marked = [item for item in stories if item["near_duplicate_of"]]
    assert {item["title"] for item in marked} == {f"Story {n}" for n in range(1, STORIES + 1)}
    for item in marked:
        first = by_url[item["near_duplicate_of"]]
        assert first["title"] == item["title"] and first["near_duplicate_of"] is None
    assert nodes.stat(0, "duplicates/near_pages") == len(marked)
    assert nodes.stat(0, "duplicates/pages") == ITEMS + 1
    assert nodes.stat(0, "duplicates/items_dropped") == ITEMS + 1
    # a duplicate's links are its original's, which this node sent: the link path
    # skips them (links/known) before the middleware would drop them
    assert nodes.stat(0, "duplicates/links_dropped") == 0
    assert nodes.stat(0, "links/known") >= ITEMS * 16 + ITEMS + 1
    assert nodes.stat(0, "urlnorm/changed/TrackingParameters") > 0
    assert nodes.stat(0, "urlnorm/changed/SessionId") > 0
    assert nodes.stat(0, "urlnorm/changed/SortedQuery") > 0
    # the command says the same of a URL as the crawl did
    shown = scrapy("normalize", demo_site.url + "/variants/item;jsessionid=S1X?id=3&colour=red")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[0] == demo_site.url + page_path(3)


def test_with_the_chain_off_variants_are_fetched_and_their_content_marks_them(
    redis_url, redis_client, nodes, demo_site, tmp_path
):
    fetched = crawl_variants(
        redis_url, redis_client, nodes, demo_site,
        URL_NORMALIZE_ENABLED=False, CONTENT_DUPLICATES="mark",
    )  # fmt: skip
    # Scrapy's fingerprint sorts the query and drops the fragment: the tracking
    # parameters and session ids still make URLs of their own
    assert sum(fetched.values()) >= 3 * ITEMS, sum(fetched.values())
    items = [item for item in read_items(tmp_path / "items") if item["title"] != "Variants"]
    first = [item for item in items if item["duplicate_of"] is None]
    assert Counter(item["title"] for item in first) == Counter(dict.fromkeys(TITLES, 1))
    by_url = {item["url"]: item["title"] for item in first}
    marked = [item for item in items if item["duplicate_of"] is not None]
    assert len(marked) >= ITEMS
    assert all(by_url[item["duplicate_of"]] == item["title"] for item in marked)


def test_a_page_naming_its_canonical_has_it_marked_seen_and_recorded(
    redis_url, redis_client, nodes, demo_site, tmp_path
):
    """/variants/amp/N names item N's page as its canonical and links to it: the
    link is not followed, the AMP page's item records the canonical. AMP 1 names
    another site and AMP 2 a malformed URL: ignored and counted."""
    redis_client.lpush("site:start_urls", demo_site.url + "/variants/amp/")
    nodes.start("site", redis_url, spider_args={"allow": "/variants/(amp/|item)"}, **SETTINGS)
    assert nodes.wait(120) == [0], nodes.tail()
    items = {
        item["url"].removeprefix(demo_site.url): item for item in read_items(tmp_path / "items")
    }
    fetched_items = {path for path in site_hits(demo_site) if path.startswith("/variants/item")}
    assert fetched_items == set()
    for n in range(3, ITEMS + 1):
        assert items[f"/variants/amp/{n}"]["canonical"] == demo_site.url + page_path(n)
    assert items["/variants/amp/1"]["canonical"] is None
    assert items["/variants/amp/2"]["canonical"] is None
    assert nodes.stat(0, "canonical/other_site") == 1
    assert nodes.stat(0, "canonical/malformed") == 1
    assert nodes.stat(0, "canonical/marked_seen") == ITEMS - 2


def test_a_parameter_that_never_changes_a_page_is_learned_and_no_longer_fetched(
    redis_url, redis_client, nodes, demo_site, tmp_path
):
    """/variants/list?page=N links to page N+1 and to itself under five sort
    orders that change nothing: once pairs of its fetched pages have shown it,
    sort is dropped from the host's URLs, and the later pages' orders are not
    fetched; page, which changes the pages, is kept."""
    redis_client.lpush("site:start_urls", demo_site.url + "/variants/list?page=1")
    nodes.start("site", redis_url, spider_args={"allow": "/variants/list"}, **SETTINGS,
                CONTENT_DUPLICATES="drop")  # fmt: skip
    assert nodes.wait(120) == [0], nodes.tail()
    hits = site_hits(demo_site)
    assert all(hits.get(f"/variants/list?page={n}") == 1 for n in range(1, LIST_PAGES + 1))
    sorted_fetched = [path for path in hits if "sort=" in path]
    # learned while the first pages' orders came in (the second page's are queued
    # by then, and a busy node may queue the third's): the later pages' are never
    # fetched, of the 40 a crawl that learns nothing fetches
    assert 2 <= len(sorted_fetched) <= 3 * len(SORTS), sorted_fetched
    titles = [item["title"] for item in read_items(tmp_path / "items")]
    assert sorted(titles) == sorted(f"List page {n}" for n in range(1, LIST_PAGES + 1))
    assert nodes.stat(0, "urlnorm/learned") == 1
    status = scrapy("status", "site", "--hosts", "--json", "-s", f"REDIS_URL={redis_url}")
    [row] = json.loads(status.stdout)["hosts"]
    assert row["learned_parameters"]["sort"] >= 3
    assert row["learned_parameters"]["page"] == -1
    text = scrapy("status", "site", "--hosts", "-s", f"REDIS_URL={redis_url}").stdout
    assert "query parameters learned: dropped sort; kept (they changed a page) page" in text


def test_a_www_mirror_naming_its_canonical_stores_each_page_once(
    redis_url, redis_client, nodes, demo_site, tmp_path
):
    """The variants under www.shop.test, whose item pages name the same URL on
    shop.test as canonical (names a DNS server the test runs answers): each
    item is stored once, recording its canonical, and shop.test is never asked."""
    zone, log = tmp_path / "zone.json", tmp_path / "queries.log"
    zone.write_text(json.dumps({name: {"a": ["127.0.0.1"], "ttl": 300}
                                for name in ("shop.test", "www.shop.test")}))  # fmt: skip
    log.write_text("")
    dns = services.start_dns_server(zone, log)
    try:
        port = demo_site.url.rsplit(":", 1)[1]
        mirror, page = f"http://www.shop.test:{port}", f"http://shop.test:{port}"
        redis_client.lpush("site:start_urls", mirror + "/variants/")
        nodes.start("site", redis_url, spider_args={"allow": "/variants/"}, **SETTINGS,
                    DNS_SHARED=True, DNS_SERVERS=dns.url, CONTENT_DUPLICATES="drop")  # fmt: skip
        assert nodes.wait(120) == [0], nodes.tail()
    finally:
        dns.stop()
    with urllib.request.urlopen(demo_site.url + "/__host_times", timeout=10) as answer:
        hosts = {host.rsplit(":", 1)[0] for host in json.load(answer)}
    assert hosts == {"www.shop.test"}, nodes.tail()
    items = [item for item in read_items(tmp_path / "items") if item["title"] != "Variants"]
    assert Counter(item["title"] for item in items) == Counter(dict.fromkeys(TITLES, 1))
    for item in items:
        n = int(item["title"].split()[1])
        assert item["canonical"] == page + page_path(n), item
    assert nodes.stat(0, "canonical/marked_seen") == ITEMS
