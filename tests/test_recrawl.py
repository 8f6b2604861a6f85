"""Recrawls: pages fetched again after RECRAWL_AFTER, conditionally, with change detection."""

import json
import urllib.request

from demosite.flaky import CHANGE_EVERY, CHANGING_PAGES
from extensions.frontier.frontier import Frontier
from extensions.keys import SpiderKeys
from extensions.recrawl.records import revisit_page
from extensions.recrawl.redisstore import RecrawlStore
from servers import services
from servers.clients import redis_at
from tests.conftest import crawler_with_addon, queued, read_items, site_hits

PAGES = {f"/changing/{n}" for n in range(1, CHANGING_PAGES + 1)}


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
        assert all(hits[page] >= CHANGE_EVERY + 2 for page in PAGES), hits  # past a change
        with urllib.request.urlopen(site.url + "/__not_modified", timeout=10) as answer:
            not_modified = json.load(answer)
        assert all(not_modified.get(page, 0) >= CHANGE_EVERY - 1 for page in PAGES)

        # a 304 is not parsed: items only for the full answers, each a new version
        items = [i["url"].removeprefix(site.url) for i in read_items(tmp_path / "items")]
        for page in PAGES:
            assert items.count(page) == hits[page] - not_modified[page]
        stats = nodes.stats(0)
        assert stats["recrawl/not_modified"] == sum(not_modified.get(p, 0) for p in PAGES)
        assert stats["recrawl/changed"] >= len(PAGES)  # the version changed under them
        assert stats.get("recrawl/unchanged", 0) == 0  # the site answers 304 when it is
        queued = int(redis_client.hget("site:frontier", "queued") or 0)  # (leased at close)
        assert redis_client.zcard("site:due") + queued == len(PAGES)  # each waits its turn
        # a record is the request as leased: what the downloader added comes afresh
        # (a new user agent each time), and the validators ride in meta only
        assert redis_client.hlen("site:revisit") == len(PAGES)
        for record in redis_client.hvals("site:revisit"):
            request = json.loads(record.partition(b"\n")[2])
            assert set(request.get("headers", {})) <= {"Referer"}, request
            assert set(request["meta"]) <= {"recrawl", "root_host", "depth"}, request
    finally:
        site.stop()


def test_with_mongodb_the_recrawl_state_lives_in_a_status_collection_and_changes_are_dated(
    redis_url, redis_client, mongo_db, nodes
):
    """RECRAWL_STORE = "mongo" (the default with MONGO_URI): the pages' state goes to
    NAME_status, Redis holds only the pages moved from there into the queue, and each
    stored item's _changed_at moves when its version does."""
    mongo_uri, database, db = mongo_db
    site = services.start_demo_site()
    try:
        redis_client.lpush("site:start_urls", site.url + "/changing/")
        nodes.start("site", redis_url, spider_args={"allow": "/changing/"},
                    MONGO_URI=mongo_uri, MONGO_DATABASE=database,
                    RECRAWL_RULES=json.dumps({"/changing/[0-9]": 0.5}),
                    NODE_HEARTBEAT_INTERVAL=0.3, CLOSESPIDER_TIMEOUT=7,
                    MAX_IDLE_TIME_BEFORE_CLOSE=0)  # fmt: skip
        assert nodes.wait(60) == [0], nodes.tail()
        hits = site_hits(site)
        fetches = CHANGE_EVERY + 1  # past one change of each page
        assert all(hits[page] >= fetches for page in PAGES), hits
        assert "pages kept for a recrawl go to MongoDB" in nodes.log(0)

        status = {doc["url"].removeprefix(site.url): doc for doc in db["site_status"].find()}
        assert set(status) == PAGES  # one document a page, however often fetched
        for doc in status.values():
            request = json.loads(doc["request"])
            assert request["url"] == doc["url"] and request["dont_filter"] is True
            assert request["meta"]["recrawl"]["etag"]  # the validators for the next fetch
        assert redis_client.zcard("site:due") == 0  # no dates in Redis
        assert redis_client.hlen("site:revisit") <= len(PAGES)  # only pages queued now
        stats = nodes.stats(0)
        assert stats["recrawl/stored"] >= len(PAGES) * fetches
        assert stats["recrawl/queued"] >= len(PAGES) * (fetches - 1)

        # each version is a new title: the item's _changed_at moved, at its last version
        assert nodes.stat(0, "mongo/changed") >= len(PAGES)
        for doc in db["site"].find({"url": {"$regex": "/changing/[0-9]"}}):
            assert str(doc["_changed_at"]) != str(doc["_first_seen"]), doc
    finally:
        site.stop()


def test_a_page_down_at_its_recrawl_is_dead_lettered_and_stays_on_the_schedule(
    redis_url, redis_client, nodes
):
    from tests.helpers import wait_for

    site = services.start_demo_site()

    def switch(path: str, up: bool = False) -> None:
        query = f"path={path}" + ("&up=1" if up else "")
        urllib.request.urlopen(urllib.request.Request(
            f"{site.url}/__down?{query}", method="POST"), timeout=10).close()  # fmt: skip

    def letters() -> int:
        return sum(b"/changing/2" in raw for raw in redis_client.lrange("site:dlq", 0, -1))

    try:
        redis_client.lpush("site:start_urls", site.url + "/changing/")
        nodes.start("site", redis_url, spider_args={"allow": "/changing/"},
                    RECRAWL_RULES=json.dumps({"/changing/[0-9]": 0.5}), RETRY_TIMES=0,
                    # its 503 fails the page at once, and slows no host down
                    HOST_BACKOFF_RETRY_TIMES=0, CLUSTER_AUTOTHROTTLE_ENABLED=False,
                    NODE_HEARTBEAT_INTERVAL=0.3, CLOSESPIDER_TIMEOUT=10,
                    MAX_IDLE_TIME_BEFORE_CLOSE=0)  # fmt: skip
        wait_for(lambda: site_hits(site).get("/changing/2", 0) >= 2, 30, "a recrawl")
        switch("/changing/2")
        wait_for(lambda: letters() >= 2, 30, "the page failing, again and again")
        switch("/changing/2", up=True)
        back_at = site_hits(site)["/changing/2"]
        wait_for(lambda: site_hits(site)["/changing/2"] > back_at + 1, 30, "fetched once back")
        assert nodes.wait(60) == [0], nodes.tail()
        stats = nodes.stats(0)
        assert stats["recrawl/failed"] == letters() >= 2
        kept = [revisit_page(r) for r in redis_client.hvals("site:revisit")]
        assert {url.removeprefix(site.url) for url, _ in kept} == PAGES
        assert redis_client.zcard("site:due") + len(queued(redis_client, "site")) == len(PAGES)
    finally:
        site.stop()


def test_an_adaptive_interval_grows_while_a_page_stays_the_same_and_shrinks_when_it_changes():

    from extensions.recrawl.middleware import RecrawlMiddleware

    settings = {"RECRAWL_ADAPTIVE": True, "RECRAWL_MIN": 60, "RECRAWL_MAX": 1000}
    middleware = RecrawlMiddleware(crawler_with_addon(settings=settings))
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

    from extensions.recrawl.middleware import RecrawlMiddleware

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

    server = redis_at(redis_url)
    frontier = Frontier(server, SpiderKeys.for_spider("site"), "test")
    entries = []
    for path, fetched_at, due in pages:
        url = "http://shop.test" + path
        request = {"url": url, "dont_filter": True, "meta": {"recrawl": {
            "url": url, "fetched_at": fetched_at, "interval": 3600}}}  # fmt: skip
        entries.append((f"{len(entries):040x}", "shop.test", due, json.dumps(request).encode()))
    RecrawlStore(frontier).revisit(entries)
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

    from extensions.frontier.leased import leased_for
    from extensions.recrawl.middleware import RecrawlItemsMiddleware, RecrawlMiddleware
    from extensions.recrawl.revisits import revisits_for

    class Prices(Spider):
        name = "prices"
        recrawl_fingerprint = "items"
        recrawl_ignore_fields = ("fetched_at",)

    crawler = crawler_with_addon(Prices, {"RECRAWL_AFTER": 60})
    crawler.spider = Prices()
    fetcher = RecrawlMiddleware(crawler)
    hasher = RecrawlItemsMiddleware.from_crawler(crawler)
    remember_as_leased = leased_for(crawler).remember  # what the scheduler calls
    pending_revisits = revisits_for(crawler).pending  # what the scheduler reads
    url = "http://shop.test/p/1"

    def fetch(state, body, price, fetched_at):
        request = Request(url, meta={"recrawl": state} if state else {})
        remember_as_leased(request)  # as the scheduler does
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
    remember_as_leased(request)
    fetcher.process_response(request, HtmlResponse(url, body=b"x", request=request))
    settle = pending_revisits.get(request)
    assert callable(settle) and settle() is not None

    # a request the frontier never handed out (robots.txt, engine.download) is not kept
    robots = Request("http://shop.test/robots.txt")
    fetcher.process_response(robots, HtmlResponse(robots.url, body=b"x", request=robots))
    assert robots not in pending_revisits


def test_a_node_dying_while_moving_due_pages_out_of_mongodb_leaves_none_behind_and_none_twice(
    redis_url, redis_client, mongo_db
):
    import time

    from extensions.recrawl.statusstore import MongoStatusStore
    from tests.conftest import queued

    uri, database, db = mongo_db
    one, two = (MongoStatusStore(uri, database, "site_status", node) for node in ("n1", "n2"))
    frontier = RecrawlStore(Frontier(redis_at(redis_url), SpiderKeys.for_spider("site"), "n1"))
    now = time.time()
    pages = []
    for n in range(10):
        url = f"http://shop.test/p/{n}"
        request = {"url": url, "dont_filter": True, "meta": {"recrawl": {"url": url,
                   "fetched_at": now - 100}}}  # fmt: skip
        pages.append((f"{n:040x}", "shop.test", now - 10, json.dumps(request).encode()))
    one.write(pages)
    hostile = {"_id": "hostile", "due": now - 5, "request": {"$where": 1}}  # due last
    db["site_status"].insert_one(hostile)

    # n1 takes six and queues them, then dies before telling MongoDB
    claim = one.claim(6, hold=60)
    assert len(claim.ids) == 6 and frontier.requeue(claim.pages) == len(claim.pages)
    # n2 meanwhile moves the others, never n1's; the hostile document is set aside
    assert two.feed(frontier, 100, hold=60) == 4
    assert db["site_status"].find_one({"_id": "hostile"})["due"] is None
    # once n1's hold is over, n2 takes its six: they are queued already, not again
    again = two.claim(100, hold=60, now=time.time() + 61)
    assert sorted(again.ids) == sorted(claim.ids)
    assert frontier.requeue(again.pages) == 0
    two.mark_queued(again)
    urls = sorted(json.loads(data)["url"] for data in queued(redis_client, "site"))
    assert urls == sorted(f"http://shop.test/p/{n}" for n in range(10))  # each once
    assert len(list(db["site_status"].find({"due": None}))) == 11

    # fetched again: the new status clears any claim; the mark goes with the release
    one.write(pages[:1])
    frontier.unmark([(pages[0][0], "shop.test")])
    assert one.claim(100, hold=60).pages[0][0] == pages[0][0]
    one.close()
    two.close()


def test_scrapy_recrawl_and_status_read_the_mongodb_status_collection(
    redis_url, redis_client, mongo_db
):
    import time

    from extensions.recrawl.statusstore import MongoStatusStore
    from tests.conftest import queued, scrapy

    uri, database, _ = mongo_db
    store = MongoStatusStore(uri, database, "site_status")
    now, day = time.time(), 86400
    entries = []
    for n, (fetched, due) in enumerate([(now - 9 * day, now + 1800), (now - 60, now + 5400),
                                        (now - 9 * day, now - 5)]):  # fmt: skip
        url = f"http://shop.test/p/{n}"
        request = {"url": url, "meta": {"recrawl": {"url": url, "fetched_at": fetched}}}
        entries.append((f"{n:040x}", "shop.test", due, json.dumps(request).encode()))
    store.write(entries)
    store.close()
    settings = ("-s", f"REDIS_URL={redis_url}", "-s", f"MONGO_URI={uri}",
                "-s", f"MONGO_DATABASE={database}")  # fmt: skip

    status = json.loads(scrapy("status", "site", "--json", *settings).stdout)
    assert (status["recrawl"], status["due"], status["due_by_hour"][:2]) == (3, 1, [1, 1])
    done = scrapy("recrawl", "site", "--older-than", "7d", *settings)
    assert "1 pages of site made due now; 2 due pages queued" in done.stdout, done.stderr
    assert sorted(json.loads(d)["url"][-1] for d in queued(redis_client, "site")) == ["0", "2"]


def test_a_kept_page_that_fails_for_good_stays_kept_and_one_that_is_gone_is_dropped():
    """A site down for an hour must not take its pages off the schedule: a recrawl
    dead-lettered after its retries is kept as it was, due again after its interval.
    A 404 or 410 says the page is gone: it is dropped."""
    import time

    from scrapy import Request, Spider
    from scrapy.http import HtmlResponse

    from extensions.frontier.leased import leased_for
    from extensions.recrawl.middleware import RecrawlMiddleware
    from extensions.recrawl.revisits import revisits_for

    crawler = crawler_with_addon(Spider, {"RECRAWL_AFTER": 60})
    crawler.spider = Spider("s")
    fetcher = RecrawlMiddleware.from_crawler(crawler)
    # what the scheduler calls and reads
    remember_as_leased, revisits = leased_for(crawler).remember, revisits_for(crawler)
    url = "http://shop.test/p/1"
    state = {"url": url, "fetched_at": 1000.0, "interval": 600.0, "etag": '"v1"'}

    failed = Request(url, meta={"recrawl": state})  # the scheduler saw it dead-lettered
    remember_as_leased(failed)
    entry = revisits.after_failure(failed)
    assert entry is not None
    _, _, due, data = entry
    assert time.time() + 590 < due <= time.time() + 600
    kept = json.loads(data)["meta"]["recrawl"]
    assert kept["fetched_at"] == 1000.0 and kept["etag"] == '"v1"'  # as it was

    first = Request(url)  # never kept: nothing to keep after a failure
    remember_as_leased(first)
    assert revisits.after_failure(first) is None

    gone = Request(url, meta={"recrawl": state})
    remember_as_leased(gone)
    fetcher.process_response(gone, HtmlResponse(url, status=404, body=b"", request=gone))
    assert gone not in revisits.pending
    stats = crawler.stats.get_stats()
    assert (stats["recrawl/failed"], stats["recrawl/gone"]) == (1, 1)
