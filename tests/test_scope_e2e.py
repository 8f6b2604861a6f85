"""Crawl scope as data, end to end: real nodes of the bundled ``site`` spider,
real Redis, the demo site's ``/sections/`` (blog, shop and private, every
section linking to the others), and the commands a person would type."""

import json
import signal

from demosite.sections import PAGES, section_paths
from extensions.keys import SpiderKeys
from extensions.scope.store import ScopeStore
from tests.conftest import read_items, scrapy
from tests.helpers import page_hits, site_times, wait_for

SETTINGS = {"MAX_IDLE_TIME_BEFORE_CLOSE": 3, "NODE_TIMEOUT": 5}


def command(redis_url: str, *args: str) -> str:
    result = scrapy(*args, "-s", f"REDIS_URL={redis_url}")
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def scope_file(tmp_path, name: str, document: dict) -> str:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(document))
    return str(path)


def test_two_crawls_of_one_spider_fetch_exactly_what_their_scopes_take(
    redis_url, redis_client, demo_site, nodes, tmp_path
):
    blog = scope_file(tmp_path, "blog", {"scope": "prefix", "exclude": ["sort="]})
    public = scope_file(tmp_path, "public", {"scope": "host", "exclude": ["/private/"]})
    root = demo_site.url + "/sections/"
    command(redis_url, "seed", "site", root + "blog/0", "--crawl", "blog", "--scope", blog)
    command(redis_url, "seed", "site", root + "shop/0", "--crawl", "public", "--scope", public)
    # two seeds of one crawl, each with a scope of its own
    own = [json.dumps({"url": root + "blog/0", "meta": {"scope": {"scope": "page"}}}),
           json.dumps({"url": root + "private/0",
                       "meta": {"scope": {"scope": "prefix", "exclude": ["sort="]}}})]  # fmt: skip
    command(redis_url, "seed", "site", *own, "--crawl", "seeds")
    for node in ("n1", "n2"):
        nodes.start("site", redis_url, NODE_ID=node, **SETTINGS)
    for proc in nodes.procs:
        proc.wait(240)
        assert proc.returncode == 0, nodes.tail()

    hits = {p: n for p, n in page_hits(demo_site).items() if p.startswith("/sections/")}
    blog_pages = section_paths("blog")
    shop_pages = section_paths("shop")
    expected = {path: 2 for path in blog_pages}  # once by each crawl
    expected["/sections/blog/0"] = 3  # and by the seed whose scope is its page
    expected |= {path: 1 for path in shop_pages + section_paths("private")}
    expected |= {f"{path}?sort=price": 1 for path in blog_pages + shop_pages}
    assert hits == expected

    status = json.loads(command(redis_url, "status", "site", "--json"))
    refused = status["scope_refused"]
    assert refused["excluded"] > 0 and refused["outside"] > 0
    shown = json.loads(command(redis_url, "scope", "site", "--crawl", "blog"))
    assert shown["scope"] == {"exclude": ["sort="], "scope": "prefix"}
    assert shown["counts"]["outside"] > 0


def test_an_exclusion_added_mid_crawl_reaches_queued_work_and_every_node(
    redis_url, redis_client, nodes, tmp_path
):
    from servers import services

    site = services.start_demo_site(latency=0.3)
    try:
        host = scope_file(tmp_path, "host", {"scope": "host"})
        root = site.url + "/sections/"
        command(redis_url, "seed", "site", root + "shop/0", "--crawl", "c", "--scope", host)
        for node in ("n1", "n2"):
            nodes.start("site", redis_url, NODE_ID=node, **SETTINGS)
        wait_for(lambda: len(page_hits(site)) >= 40, 120, "the crawl under way")
        # a node killed as the scope changes: its leases go back to the queue, and
        # whoever leases them next judges them by the new scope
        nodes.procs[0].send_signal(signal.SIGKILL)
        nodes.procs[0].wait(30)
        out = command(redis_url, "scope", "site", "--crawl", "c", "--exclude", "/private/")
        assert '"exclude":["/private/"]' in out
        changed_at = max(t for times in site_times(site).values() for t in times)
        nodes.start("site", redis_url, NODE_ID="n3", **SETTINGS)
        for proc in nodes.procs[1:]:
            proc.wait(240)
            assert proc.returncode == 0, nodes.tail()
        times = site_times(site)
    finally:
        site.stop()

    private = [path for path in times if path.startswith("/sections/private/")]
    late = [p for p in private if min(times[p]) > changed_at]
    # what the live node's engine held when the change came may still go out (at
    # most its concurrency); nothing leased after it does
    assert len(late) <= 32, late
    # some of the private section (its 40 pages and their 40 sort orders) was never
    # fetched: how much was before the change is the machine's speed, not the scope's
    assert len(private) < 2 * PAGES
    keys = SpiderKeys.for_spider("site")
    counts = ScopeStore(redis_client, keys).counts("c")
    assert counts["excluded"] > 0  # what was queued, swept or refused at its lease
    # the rest of the site was crawled whole
    assert {f"/sections/shop/{n}" for n in range(PAGES)} <= set(times)
    assert {f"/sections/blog/{n}" for n in range(PAGES)} <= set(times)


def test_limits_stop_a_crawl_within_one_lease_batch_per_node(
    redis_url, redis_client, nodes, tmp_path
):
    from servers import services

    site = services.start_demo_site(latency=0.3)
    try:
        root = site.url + "/sections/"
        limits = {"pages": {"max_pages": 30}, "bytes": {"max_bytes": 40_000},
                  "seconds": {"max_seconds": 5}}  # fmt: skip
        for crawl, limit in limits.items():
            path = scope_file(tmp_path, crawl, {"scope": "host", **limit})
            command(redis_url, "seed", "site", root + "blog/0", "--crawl", crawl, "--scope", path)
        for node in ("n1", "n2"):
            nodes.start("site", redis_url, NODE_ID=node, **SETTINGS)
        for proc in nodes.procs:
            proc.wait(240)
            assert proc.returncode == 0, nodes.tail()
    finally:
        site.stop()

    items = read_items(tmp_path / "items")
    pages = {crawl: [i for i in items if i.get("_crawl") == crawl] for crawl in limits}
    whole = 3 * 2 * PAGES  # every section, and its sort order
    batch = 2 * 16  # FRONTIER_FETCH_BATCH per node
    assert 30 <= len(pages["pages"]) <= 30 + batch
    crawls = json.loads(command(redis_url, "crawls", "site", "--json"))
    states = {row["crawl"]: row["state"] for row in crawls["crawls"]}
    assert states == {"pages": "stopped", "bytes": "stopped", "seconds": "stopped"}
    fetched = ScopeStore(redis_client, SpiderKeys.for_spider("site")).counts("bytes")
    assert fetched["bytes"] >= 40_000 and len(pages["bytes"]) < whole
    assert len(pages["bytes"]) <= fetched["pages"] <= len(pages["bytes"]) + batch
    # its seconds count from the seed: on a loaded machine they may pass before a
    # node has started; either way the crawl stops by itself, short of the site
    assert len(pages["seconds"]) < whole
    assert "max_seconds (5) passed" in nodes.log(0) + nodes.log(1)
