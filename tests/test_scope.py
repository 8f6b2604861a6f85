"""Crawl scope as data: the document and its checks, the judgement of a URL,
a node's view of the cluster's scopes on a real Redis, and the commands."""

import json
import time
from types import SimpleNamespace

import pytest
from scrapy import Request
from scrapy.settings import Settings
from scrapy.statscollectors import MemoryStatsCollector

from extensions.keys import SpiderKeys
from extensions.meta import CRAWL_ID, control_meta_problem
from extensions.scope.changes import Change
from extensions.scope.declared import SCOPE_TRAIL
from extensions.scope.document import EMPTY, ScopeError, parse
from extensions.scope.rules import Trail, judge
from extensions.scope.state import ScopeState
from extensions.scope.store import ScopeStore
from tests.conftest import scrapy

SEED = "https://example.com/blog/index.html"


@pytest.mark.parametrize(
    ("document", "field"),
    [
        ({"include": ["("]}, "include"),
        ({"exclude": ["ok", "[z-a]"]}, "exclude"),
        ({"colour": "red"}, "colour"),
        ({"max_pages": -1}, "max_pages"),
        ({"max_bytes": "many"}, "max_bytes"),
        ({"max_seconds": 0}, "max_seconds"),
        ({"max_depth": 1.5}, "max_depth"),
        ({"extra_hops": True}, "extra_hops"),
        ({"scope": "planet"}, "scope"),
        ({"sitemaps": "all"}, "sitemaps"),
        ([1, 2], "scope"),
        ("{not json", "scope"),
    ],
)
def test_a_document_that_does_not_hold_is_refused_naming_its_field(document, field):
    with pytest.raises(ScopeError) as refused:
        parse(document)
    assert str(refused.value).startswith(f"{field}:")
    assert "\n" not in str(refused.value)


def test_a_document_reads_back_as_given():
    text = {"scope": "host", "include": ["/a/"], "exclude": ["\\?sort="], "max_pages": 10,
            "max_seconds": 2.5, "sitemaps": "skip"}  # fmt: skip
    scope = parse(json.dumps(text))
    assert scope.as_dict() == text
    assert parse(scope.to_json()) == scope
    assert scope.limits == {"max_pages": 10, "max_seconds": 2.5}


def judged(document: dict, url: str, hops: int = 1, out: int = 0) -> str | None:
    return judge([parse(document)], url, Trail(SEED, hops, out))[0]


@pytest.mark.parametrize(
    ("kind", "inside", "outside"),
    [
        ("page", SEED, "https://example.com/blog/other.html"),
        ("prefix", "https://example.com/blog/2024/post?x=1", "https://example.com/shop/"),
        ("host", "https://example.com/shop/", "https://www.example.com/blog/"),
        ("domain", "https://www.example.com/x", "https://example.org/blog/"),
        ("any", "https://elsewhere.example.net/", None),
    ],
)
def test_each_kind_of_scope_takes_in_what_it_names(kind, inside, outside):
    assert judged({"scope": kind}, inside) is None
    if outside is not None:
        assert judged({"scope": kind}, outside) == "outside"


def test_exclude_wins_include_widens_depth_counts_hops():
    both = {"scope": "prefix", "include": ["/shop/"], "exclude": ["/shop/private"]}
    assert judged(both, "https://example.com/shop/a") is None
    assert judged(both, "https://example.com/shop/private/a") == "excluded"
    assert judged({"exclude": ["blog"]}, SEED) == "excluded"
    assert judged({}, "https://anywhere.example/") is None  # the spider's rules alone
    assert judged({"include": ["/docs/"]}, "https://example.com/docs/a") is None
    assert judged({"include": ["/docs/"]}, "https://example.com/blog/") == "outside"
    assert judged({"max_depth": 2}, SEED, hops=2) is None
    assert judged({"max_depth": 2}, SEED, hops=3) == "depth"
    assert judged({"scope": "prefix"}, "not a url\x00:") == "outside"


def test_extra_hops_fetch_pages_outside_without_following_them():
    scope = [parse({"scope": "host", "extra_hops": 1})]
    outside = "https://other.example/"
    # one hop out of an in-scope page: taken, one hop outside
    assert judge(scope, outside, Trail(SEED, 1, out=0)) == (None, 1)
    # its own links: two hops out, refused; a link back into the scope is in again
    assert judge(scope, outside + "b", Trail(SEED, 2, out=1)) == ("outside", 2)
    assert judge(scope, "https://example.com/x", Trail(SEED, 2, out=1)) == (None, 0)


def changed(scope, include, exclude, sets):
    return Change(include=include, exclude=exclude, sets=sets).applied_to(scope)


def test_changes_are_checked_whole_and_refused_naming_the_field():
    scope = changed(EMPTY, ["/a/"], ["/b/"], ["max_pages=5", "scope=host"])
    assert scope.as_dict() == {"include": ["/a/"], "exclude": ["/b/"], "max_pages": 5,
                               "scope": "host"}  # fmt: skip
    assert changed(scope, [], [], ["max_pages=null"]).max_pages is None
    for sets, field in ((["max_pages=-3"], "max_pages"), (["colour=red"], "colour"),
                        (["max_pages"], "max_pages"), (["scope=planet"], "scope")):  # fmt: skip
        with pytest.raises(ScopeError, match=f"^{field}:"):
            changed(scope, [], [], sets)
    with pytest.raises(ScopeError, match=r"^exclude:"):
        changed(scope, [], ["(unclosed"], [])


def test_a_trail_from_a_queue_entry_must_be_well_formed():
    assert control_meta_problem({SCOPE_TRAIL: [SEED, 1, 0, ""]}) is None
    for bad in ([SEED, -1, 0, ""], [SEED, 1, 0], "seed", [SEED, "1", 0, ""]):
        assert control_meta_problem({SCOPE_TRAIL: bad}) is not None


# --- a node's view, on a real Redis ------------------------------------------------------


class Health:
    def __init__(self):
        self.failures = []

    def failed(self, exc):
        self.failures.append(exc)


def node_state(redis_client, stopped=None):
    keys = SpiderKeys.for_spider("scoped")
    stats = MemoryStatsCollector(SimpleNamespace(settings=Settings({"STATS_DUMP": False})))
    state = ScopeState(ScopeStore(redis_client, keys), stats, Health(), refresh=0.5,
                       stop_crawl=lambda crawl, why: stopped.append((crawl, why))
                       if stopped is not None else None)  # fmt: skip
    return state, stats


def look_now(state):
    state.looked = float("-inf")
    state.look()


def test_a_change_reaches_every_queued_request_at_the_next_look(redis_client):
    store = ScopeStore(redis_client, SpiderKeys.for_spider("scoped"))
    store.set_crawl_scope("c", parse({"scope": "host"}))
    state, stats = node_state(redis_client)
    look_now(state)
    parent = Request(SEED, meta={CRAWL_ID: "c"})
    child = Request("https://example.com/private/1", meta={CRAWL_ID: "c"})
    assert state.child(parent, child) is None
    assert child.meta[SCOPE_TRAIL] == [SEED, 1, 0, ""]
    assert state.leased(child) is None

    store.set_crawl_scope("c", parse({"scope": "host", "exclude": ["/private/"]}))
    look_now(state)
    assert state.leased(child) == "excluded"
    assert state.leased(Request(SEED, meta={CRAWL_ID: "other"})) is None  # another crawl
    look_now(state)  # the counts go out
    assert store.counts("c") == {"excluded": 1}
    assert stats.get_value("scope/excluded") == 1


def test_a_crawl_met_first_is_judged_by_the_scope_stored_since_the_last_look(redis_client):
    state, _ = node_state(redis_client)
    look_now(state)  # (and not again for SCOPE_REFRESH)
    store = ScopeStore(redis_client, SpiderKeys.for_spider("scoped"))
    store.set_crawl_scope("new", parse({"scope": "host", "exclude": ["/private/"]}))
    parent = Request(SEED, meta={CRAWL_ID: "new"})  # its seed, fetched at once
    assert state.child(parent, Request("https://example.com/private/1")) == "excluded"
    assert state.child(parent, Request("https://other.example/")) == "outside"


def test_a_seed_of_its_own_scope_is_stored_once_and_a_bad_one_dead_lettered(redis_client):
    state, _ = node_state(redis_client)
    look_now(state)
    seeds = [Request(f"https://example.com/{n}", meta={"scope": {"scope": "page"}})
             for n in range(3)]  # fmt: skip
    assert [state.seed_problem(seed) for seed in seeds] == [None] * 3
    docs = {seed.meta[SCOPE_TRAIL][3] for seed in seeds}
    assert len(docs) == 1 and "scope" not in seeds[0].meta
    fields = redis_client.hkeys("scoped:scope")
    assert sorted(f for f in fields if not f.startswith(b"#")) == [f"seed:{docs.pop()}".encode()]
    link = Request("https://example.com/other")
    assert state.child(seeds[0], link) == "outside"  # a page scope takes the seed alone
    bad = Request("https://example.com/", meta={"scope": {"max_pages": "lots"}})
    assert state.seed_problem(bad).startswith("meta['scope']: max_pages:")


def test_a_crawl_past_max_pages_is_stopped_and_refused(redis_client):
    stopped = []
    store = ScopeStore(redis_client, SpiderKeys.for_spider("scoped"))
    store.set_crawl_scope("c", parse({"max_pages": 3}))
    state, _ = node_state(redis_client, stopped)
    look_now(state)
    request = Request(SEED, meta={CRAWL_ID: "c"})
    for _ in range(3):
        assert state.leased(request) is None
        state.fetched("c", 1000, SEED)
    look_now(state)
    assert stopped == [("c", "max_pages (3) reached")]
    assert state.leased(request) == "limit"
    assert store.counts("c")["pages"] == 3 and store.counts("c")["bytes"] == 3000
    # a second node sees the cluster's pages, not its own
    other, _ = node_state(redis_client, [])
    look_now(other)
    assert other.leased(request) == "limit"
    # the limit raised, the nodes lease the crawl's requests again (a crawl under an
    # id that a node stopped stays stopped: scrapy stop's own)
    store.set_crawl_scope("c", parse({"max_pages": 10}))
    look_now(other)
    assert other.leased(request) is None


def test_max_pages_per_host_and_max_seconds_hold_for_the_cluster(redis_client):
    store = ScopeStore(redis_client, SpiderKeys.for_spider("scoped"))
    store.set_crawl_scope("c", parse({"max_pages_per_host": 2}))
    first, _ = node_state(redis_client)
    second, _ = node_state(redis_client)
    look_now(first)
    look_now(second)
    first.fetched("c", 10, "https://a.example/1")
    second.fetched("c", 10, "https://a.example/2")
    look_now(first)
    look_now(second)  # its write makes two: the host is full for it
    a_page, b_page = (
        Request(u, meta={CRAWL_ID: "c"}) for u in ("https://a.example/3", "https://b.example/")
    )
    assert second.leased(a_page) == "limit" and second.leased(b_page) is None

    store.set_crawl_scope("t", parse({"max_seconds": 60}))
    redis_client.hset("scoped:scope", "#since:t", int((time.time() - 61) * 1000))
    look_now(first)
    assert first.leased(Request(SEED, meta={CRAWL_ID: "t"})) == "limit"


def test_a_document_another_program_broke_is_not_applied_and_said(redis_client, caplog):
    redis_client.hset("scoped:scope", "c", "{broken")
    redis_client.hincrby("scoped:scope", "#version", 1)
    state, stats = node_state(redis_client)
    look_now(state)
    assert state.leased(Request(SEED, meta={CRAWL_ID: "c"})) is None
    assert stats.get_value("scope/unreadable") == 1
    assert "cannot be read" in caplog.text


# --- the commands ------------------------------------------------------------------------


def test_seed_with_a_bad_scope_pushes_nothing_and_names_the_field(
    redis_url, redis_client, tmp_path
):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"scope": "host", "exclude": ["(oops"]}))
    result = scrapy("seed", "site", "https://example.com/", "--crawl", "c", "--scope", str(bad),
                    "-s", f"REDIS_URL={redis_url}")  # fmt: skip
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1].startswith(f"error: --scope {bad}: exclude:")
    assert redis_client.llen("site:start_urls") == 0
    assert not redis_client.exists("site:scope")


def test_seed_scope_then_scope_shows_and_changes_it(redis_url, redis_client, tmp_path):
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"scope": "prefix", "max_pages": 100}))
    entry_bad = json.dumps({"url": "https://example.com/b", "meta": {"scope": {"scope": "x"}}})
    entry_own = json.dumps({"url": "https://example.com/c", "meta": {"scope": {"scope": "page"}}})
    result = scrapy("seed", "site", "https://example.com/a", entry_bad, entry_own, "--scope",
                    str(good), "-s", f"REDIS_URL={redis_url}")  # fmt: skip
    assert result.returncode == 1
    assert "pushed 2 start URLs" in result.stdout
    assert "meta['scope']: scope: 'x' is not one of" in result.stderr

    def scope(*args):
        return scrapy("scope", "site", *args, "-s", f"REDIS_URL={redis_url}")

    shown = json.loads(scope().stdout)
    assert shown["scope"] == {"scope": "prefix", "max_pages": 100}
    result = scope("--exclude", "/private/", "--set", "max_pages=50")
    assert result.returncode == 0, result.stderr
    refused = scope("--set", "max_pages=-1")
    assert refused.returncode == 1 and "max_pages: -1 is below 1" in refused.stderr
    assert json.loads(scope().stdout)["scope"] == {
        "scope": "prefix", "max_pages": 50, "exclude": ["/private/"]}  # fmt: skip
    assert scope("--clear").returncode == 0
    assert json.loads(scope().stdout)["scope"] is None


def test_sitemaps_include_only_and_skip():
    from extensions.scope.seeding import with_sitemaps

    seeds = ["https://a.example/blog/", json.dumps({"url": "https://b.example/x"})]
    robots = [json.loads(e) for e in with_sitemaps(seeds, parse({"sitemaps": "only"}), "c")]
    assert robots == [{"url": f"https://{h}.example/robots.txt", "sitemap": True, "crawl": "c"}
                      for h in "ab"]  # fmt: skip
    assert with_sitemaps(seeds, parse({"sitemaps": "include"}), "")[:2] == seeds
    assert with_sitemaps(seeds, parse({"sitemaps": "skip"}), "") == seeds

    class Reader:  # a spider's sitemap callback, as the frontier restores it
        def _parse_sitemap(self, response):
            return []

    state = ScopeState(None, MemoryStatsCollector(SimpleNamespace(
        settings=Settings({"STATS_DUMP": False}))), Health(), refresh=1e9)  # fmt: skip
    state.looked = 0.0  # nothing read from Redis: the documents below
    state.scopes = {"only": parse({"sitemaps": "only"}), "skip": parse({"sitemaps": "skip"})}
    sitemap = Request("https://a.example/sitemap.xml", callback=Reader()._parse_sitemap,
                      meta={CRAWL_ID: "only"})  # fmt: skip
    page = Request("https://a.example/p", meta={CRAWL_ID: "only"})
    # "only": what a sitemap lists is taken, a page's own links are not
    assert state.child(sitemap, Request("https://a.example/p", meta={CRAWL_ID: "only"})) is None
    assert state.child(page, Request("https://a.example/q", meta={CRAWL_ID: "only"})) == "outside"
    # "skip": no sitemap is read
    skipped = Request("https://a.example/sitemap.xml", callback=Reader()._parse_sitemap,
                      meta={CRAWL_ID: "skip"})  # fmt: skip
    assert state.leased(skipped) == "outside"


def test_a_seed_scope_met_while_redis_is_away_is_judged_and_stored_once_it_is_back(
    redis_client,
):
    import redis as redis_py
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    state, _ = node_state(redis_client)
    look_now(state)
    live = state.store.server
    # nothing listens there: each call fails at once
    state.store.server = redis_py.Redis(port=1, retry=Retry(NoBackoff(), 0))
    seed = Request("https://example.com/", meta={"scope": {"scope": "page"}})
    assert state.seed_problem(seed) is None  # the seed goes on
    assert state.health.failures
    assert state.child(seed, Request("https://example.com/other")) == "outside"
    state.store.server = live
    look_now(state)
    doc = seed.meta[SCOPE_TRAIL][3]
    assert json.loads(redis_client.hget("scoped:scope", f"seed:{doc}")) == {"scope": "page"}


def test_only_a_start_entry_s_meta_scope_is_a_scope(redis_url):
    """A spider's own request may use meta["scope"] for its own ends: it is queued as
    it is; the same key in what a person pushed is a scope, and a bad one is refused."""
    from extensions.meta import START_ENTRY
    from tests.test_scheduler_unit import dlq, open_scheduler, stop_loops

    scheduler = open_scheduler(redis_url)
    try:
        own = Request("http://a.test/own", meta={"scope": "premium"})
        assert scheduler.enqueue_request(own) is True
        pushed = Request("http://a.test/seed", meta={"scope": {"max_pages": "lots"},
                                                     START_ENTRY: "entry-1"})  # fmt: skip
        assert scheduler.enqueue_request(pushed) is False
        [record] = dlq(scheduler.node.server)
        assert record["url"] == "http://a.test/seed"
        assert record["error"].startswith("meta['scope']: max_pages:")
    finally:
        stop_loops(scheduler)
