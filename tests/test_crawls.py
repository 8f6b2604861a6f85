"""Several crawls of one spider in one frontier, against a real Redis: their own
dupefilters and budgets, fair turns, shared politeness, pause, resume, stop and
expiry, and their figures."""

import hashlib
import json
import math

import pytest

from extensions.crawlid import crawl_fingerprint, crawl_id_problem, split_group
from extensions.frontier.crawls.state import Crawls, UnknownCrawl
from extensions.frontier.frontier import Frontier, now_ms
from extensions.frontier.groups import group_for, queue_group_for
from extensions.keys import SpiderKeys


def entry(url: str, crawl: str = "", priority: int = 0):
    data = {"url": url, "meta": {"crawl_id": crawl} if crawl else {}}
    fingerprint = crawl_fingerprint(hashlib.sha1(url.encode()).digest(), crawl)
    group = queue_group_for(url, data["meta"])
    return (fingerprint, group, priority, json.dumps(data).encode())


def crawl_of_lease(lease) -> str:
    return split_group(lease.member.partition(b"\n")[0].decode())[1]


def lease_crawls(frontier: Frontier, count: int) -> list[str]:
    leased, _ = frontier.lease(count, lease_timeout=60)
    return [crawl_of_lease(lease) for lease in leased]


@pytest.fixture
def keys():
    return SpiderKeys.for_spider("t")


@pytest.fixture
def frontier(redis_client, keys):
    return Frontier(redis_client, keys, "n1")


@pytest.fixture
def crawls(redis_client, keys):
    return Crawls(redis_client, keys)


def fill(frontier, crawl: str, count: int, hosts: int = 4, tag: str = "") -> None:
    frontier.enqueue([entry(f"http://h{i % hosts}/{tag}{i}", crawl) for i in range(count)])


def test_a_crawl_id_is_a_short_name():
    assert crawl_id_problem("job-2026.12_a") is None
    for bad in ("", "-lead", "has space", "a#b", "x" * 65, "ü", 7, None, "a:b"):
        assert crawl_id_problem(bad), bad


def test_the_group_names_the_host_and_the_crawl_and_a_slot_cannot_fake_one():
    group = queue_group_for("http://Shop.example/a", {"crawl_id": "job1"})
    assert group == "shop.example#job1"
    assert split_group(group) == ("shop.example", "job1")
    # a download slot holding '#' is escaped: it never reads as a crawl
    slotted = group_for("http://a/", "ip#job1", "slot")
    assert split_group(slotted) == (slotted, "")
    # a crawl's queues of a host live in the host's shard
    sharded = SpiderKeys.for_spider("t", shards=8)
    assert sharded.shard_of(group) == sharded.shard_of("shop.example")


def test_each_crawl_has_its_own_dupefilter(frontier, crawls):
    crawls.register("a")
    crawls.register("b")
    urls = [f"http://h/{i}" for i in range(5)]
    assert frontier.enqueue([entry(u, "a") for u in urls]).new == 5
    assert frontier.enqueue([entry(u, "b") for u in urls]).new == 5
    assert frontier.enqueue([entry(u) for u in urls]).new == 5  # the crawl without an id
    assert frontier.enqueue([entry(u, "a") for u in urls]).new == 0  # seen, in crawl a
    assert sorted((f.crawl, f.queued) for f in map(crawls.figures, crawls.ids())) == [
        ("a", 5),
        ("b", 5),
    ]
    assert frontier.sizes().queued == 15


def test_leasing_takes_turns_between_crawls_by_weight(frontier, crawls):
    crawls.register("big")
    crawls.register("small")
    crawls.register("heavy", weight=3)
    fill(frontier, "big", 400)  # found first: without turns it would be leased first
    fill(frontier, "small", 40)
    fill(frontier, "heavy", 400)
    got: dict[str, int] = {}
    for _ in range(5):
        for crawl in lease_crawls(frontier, 20):
            got[crawl] = got.get(crawl, 0) + 1
    assert sum(got.values()) == 100
    # shares of 1:1:3 (20, 20, 60), within a lease's rounding
    assert 14 <= got["big"] <= 26 and 14 <= got["small"] <= 26, got
    assert 50 <= got["heavy"] <= 70, got


def test_priority_still_orders_within_a_crawl(frontier, crawls):
    crawls.register("a")
    frontier.enqueue([entry("http://h/low", "a"), entry("http://h/high", "a", priority=5)])
    leased, _ = frontier.lease(1, lease_timeout=60)
    assert json.loads(leased[0].data)["url"] == "http://h/high"


def test_two_crawls_of_one_host_share_its_pace(frontier, crawls, redis_client, keys):
    crawls.register("a")
    crawls.register("b")
    redis_client.hset(keys.rates, "slow", 2)  # 2 requests per second, for every crawl
    frontier.enqueue([entry(f"http://slow/{i}", c) for c in ("a", "b") for i in range(3)])
    leased, _ = frontier.lease(10, lease_timeout=60)
    # one lease hands out the host's next slot once, to one crawl; the other waits
    assert len(leased) == 1
    more_leased = []
    for _ in range(3):
        redis_client.zadd(keys.waiting, {g: 0 for g in ("slow", "slow#a", "slow#b")}, xx=True)
        redis_client.hset(keys.host("slow"), "next", now_ms())  # as if the interval passed
        more, _ = frontier.lease(10, lease_timeout=60)
        assert len(more) == 1
        more_leased += more
    # both crawls are served, one slot at a time
    assert redis_client.hget(keys.host("slow"), "leased") == b"4"
    assert sorted(crawl_of_lease(lease) for lease in [*leased, *more_leased]) == list("aabb")
    assert redis_client.exists(keys.host("slow#a")) == 0  # no politeness state of its own


def test_crawls_on_one_paced_host_take_its_slots_in_turn(frontier, crawls, redis_client, keys):
    """Each crawl's group that finds the host's slot taken waits for the host,
    and leaves the turns; it comes back as far behind as it was, so no crawl
    takes every slot (the first by name did, when all came back level)."""
    for crawl in ("a", "b", "c"):
        crawls.register(crawl)
        frontier.enqueue([entry(f"http://slow/{crawl}{i}", crawl) for i in range(30)])
    redis_client.hset(keys.rates, "slow", 2)
    got: dict[str, int] = {}
    for _ in range(30):
        groups = ("slow", "slow#a", "slow#b", "slow#c")
        redis_client.zadd(keys.waiting, {g: 0 for g in groups}, xx=True)
        redis_client.hset(keys.host("slow"), "next", now_ms())  # as if the interval passed
        for crawl in lease_crawls(frontier, 10):
            got[crawl] = got.get(crawl, 0) + 1
    assert got == {"a": 10, "b": 10, "c": 10}


@pytest.mark.parametrize("turn", [b"nan", b"inf", b"-inf", b"a lot", b""])
def test_a_crawl_whose_kept_turn_is_not_a_number_joins_as_a_new_one(
    frontier, crawls, redis_client, keys, turn
):
    crawls.register("b")
    redis_client.hset(keys.crawl("b"), "turn", turn)  # a record no lease wrote
    fill(frontier, "b", 4)  # it joins the turns alone: its kept turn would be the score
    assert lease_crawls(frontier, 8) == list("bbbb")
    # it left the turns with nothing ready, keeping a turn that is a number
    assert math.isfinite(float(redis_client.hget(keys.crawl("b"), "turn")))


def test_a_held_host_holds_every_crawl_of_it(frontier, crawls, redis_client, keys):
    crawls.register("a")
    frontier.enqueue([entry("http://held/1", "a"), entry("http://free/1", "a")])
    redis_client.hset(keys.host("held"), "hold", now_ms() + 60_000)
    leased, _ = frontier.lease(10, lease_timeout=60)
    assert [json.loads(lease.data)["url"] for lease in leased] == ["http://free/1"]
    assert redis_client.zscore(keys.waiting, "held#a") > now_ms() + 50_000


def test_a_paused_crawl_leases_nothing_and_resumes_where_it_was(frontier, crawls):
    crawls.register("a")
    crawls.register("b")
    fill(frontier, "a", 30)
    fill(frontier, "b", 30)
    first = lease_crawls(frontier, 10)
    assert set(first) == {"a", "b"}
    crawls.pause("a")
    for _ in range(3):
        assert set(lease_crawls(frontier, 5)) == {"b"}
    fill(frontier, "a", 50, hosts=8, tag="more")  # found by its pages in flight: not leased
    assert crawls.figures("a").state == "paused"
    assert crawls.figures("a").queued == 30 - first.count("a") + 50
    assert crawls.resume("a") == "paused"
    rest = []
    for _ in range(20):
        rest += lease_crawls(frontier, 10)
    assert rest.count("b") == 30 - first.count("b") - 15
    assert rest.count("a") == 30 - first.count("a") + 50  # all it held, none twice
    assert crawls.figures("a").queued == 0


def test_pausing_every_crawl_and_resuming_them(frontier, crawls):
    crawls.register("a")
    fill(frontier, "a", 10)
    fill(frontier, "", 10)
    crawls.pause()
    assert crawls.all_paused()
    assert lease_crawls(frontier, 10) == []
    fill(frontier, "", 5, tag="more")
    assert lease_crawls(frontier, 10) == []
    crawls.resume()
    leased = lease_crawls(frontier, 40)
    assert sorted(set(leased)) == ["", "a"] and len(leased) == 25


def test_resuming_one_crawl_while_all_are_paused_keeps_the_others_paused(frontier, crawls):
    crawls.register("a")
    crawls.register("b")
    fill(frontier, "a", 5)
    fill(frontier, "b", 5)
    crawls.pause()
    crawls.resume("a")
    assert set(lease_crawls(frontier, 20)) == {"a"}
    assert crawls.state("b") == "paused"


def test_stopping_a_crawl_removes_its_queue_and_keeps_its_leases_finishing(
    frontier, crawls, redis_client, keys
):
    crawls.register("a")
    crawls.register("b")
    fill(frontier, "a", 40)
    fill(frontier, "b", 10)
    leased, _ = frontier.lease(10, lease_timeout=60)
    of_a = [lease for lease in leased if crawl_of_lease(lease) == "a"]
    assert of_a
    assert crawls.stop("a") == 40 - len(of_a)
    figures = crawls.figures("a")
    assert (figures.state, figures.queued, figures.in_flight) == ("stopped", 0, len(of_a))
    assert figures.removed == 40 - len(of_a)
    # children of its pages in flight are dropped, not queued
    frontier.enqueue([entry("http://h9/child", "a")])
    assert crawls.figures("a").queued == 0
    # its leases finish normally...
    frontier.release([lease.member for lease in of_a[:1]])
    # ...or, when their node dies, are dropped instead of going back
    redis_client.zadd(keys.nodes, {"n1": now_ms() - 600_000})
    frontier.reclaim(node_timeout=60)
    assert crawls.figures("a").in_flight == 0
    assert set(lease_crawls(frontier, 50)) == {"b"}
    assert not [k for k in redis_client.scan_iter("t:queue:*#a")]
    assert not [k for k in redis_client.scan_iter("t:data:*#a")]
    assert frontier.sizes().queued == 0
    assert crawls.pause("a") == "stopped"  # cannot be paused or resumed any more


def test_a_crawl_expires_by_itself(frontier, crawls, redis_client, keys):
    crawls.register("brief", expire_after=60)
    fill(frontier, "brief", 5)
    assert crawls.end_due() == []  # not yet
    redis_client.zadd(keys.crawl_ends, {"brief": now_ms() - 1})
    assert crawls.end_due() == [("brief", "expired", 5)]
    assert crawls.figures("brief").shown_state == "expired"
    assert lease_crawls(frontier, 10) == []


def test_a_crawl_budget_caps_what_it_is_given(frontier, crawls):
    crawls.register("capped", budget=7)
    added = frontier.enqueue([entry(f"http://h/{i}", "capped") for i in range(10)])
    assert added.over_crawl_budget == 3
    figures = crawls.figures("capped")
    assert (figures.queued, figures.dropped) == (7, 3)
    fill(frontier, "", 10)  # the crawl without an id is not capped by it
    assert frontier.sizes().queued == 17


def test_retries_count_as_delayed_and_come_back_into_their_crawl(frontier, crawls, redis_client):
    crawls.register("a")
    fill(frontier, "a", 1)
    (lease,), _ = frontier.lease(1, lease_timeout=60)
    group = lease.member.partition(b"\n")[0].decode()
    with redis_client.pipeline() as pipe:
        frontier.delay([(0.0, group, lease.data)], pipe)  # due already
        frontier.release([lease.member], pipe)
        pipe.execute()
    assert crawls.figures("a").delayed == 1
    assert lease_crawls(frontier, 5) == ["a"]
    figures = crawls.figures("a")
    assert (figures.delayed, figures.queued, figures.in_flight) == (0, 0, 1)


def test_unknown_crawls_are_refused(crawls):
    with pytest.raises(UnknownCrawl):
        crawls.pause("nope")
    with pytest.raises(UnknownCrawl):
        crawls.stop("nope")
    with pytest.raises(ValueError):
        crawls.register("bad id")


def test_crawls_in_a_sharded_frontier(redis_client):
    keys = SpiderKeys.for_spider("s", shards=4)
    frontier = Frontier(redis_client, keys, "n1")
    crawls = Crawls(redis_client, keys)
    crawls.register("a", budget=100)
    crawls.register("b")
    for crawl in ("a", "b"):
        frontier.enqueue([entry(f"http://h{i}/{i}", crawl) for i in range(40)])
    assert crawls.figures("a").queued == 40
    crawls.pause("b")
    got = []
    for _ in range(12):
        got += lease_crawls(frontier, 10)
    assert set(got) == {"a"} and len(got) == 40
    assert crawls.stop("b") == 40
    assert frontier.sizes().queued == 0


def test_prometheus_labels_the_running_and_paused_crawls(frontier, crawls, redis_client, keys):
    from extensions.observability.metrics import ClusterCollector
    from tests.conftest import crawler_with_addon

    for crawl in ("live", "resting", "ended"):
        crawls.register(crawl)
        fill(frontier, crawl, 3)
    crawls.pause("resting")
    crawls.stop("ended")
    collector = ClusterCollector(crawler_with_addon(), redis_client, keys, "n1")
    families = {family.name: family for family in collector.collect()}
    queued = {
        s.labels["crawl"]: s.value
        for s in families["crawler_crawl"].samples
        if s.labels["part"] == "queued"
    }
    assert queued == {"live": 3, "resting": 3}  # a stopped crawl drops out
    paused = {s.labels["crawl"]: s.value for s in families["crawler_crawl_paused"].samples}
    assert paused == {"live": 0, "resting": 1}


@pytest.mark.parametrize("how", ["setting", "argument"])
def test_a_nodes_own_start_requests_join_its_crawl_id(how):
    import asyncio

    from scrapy import Request, Spider
    from scrapy.http import HtmlResponse

    from extensions.meta import START_ENTRY
    from extensions.spidermiddlewares.crawlid import CrawlIdMiddleware
    from tests.conftest import crawler_with_addon

    class Own(Spider):
        name = "own"

    crawler = crawler_with_addon(Own, {"CRAWL_ID": "job7"} if how == "setting" else {})
    if how == "argument":
        crawler.spider = Own(crawl_id="job7")  # -a crawl_id=job7, as scrapyd passes it
    middleware = CrawlIdMiddleware.from_crawler(crawler)

    async def start():
        yield Request("http://a/own")
        yield Request("http://a/entry", meta={START_ENTRY: "t"})  # names its own crawl

    async def collect():
        return [r async for r in middleware.process_start(start())]

    own, entry = asyncio.run(collect())
    assert own.meta["crawl_id"] == "job7" and "crawl_id" not in entry.meta
    # what a page of the crawl yields joins it; an item carries its id
    response = HtmlResponse("http://a/own", body=b"", request=own)
    child, item = middleware.process_spider_output(response, [Request("http://a/2"), {"x": 1}])
    assert child.meta["crawl_id"] == "job7" and item["_crawl"] == "job7"


def test_a_bad_crawl_id_setting_stops_the_node_with_the_reason():
    from extensions.spidermiddlewares.crawlid import CrawlIdMiddleware
    from tests.conftest import crawler_with_addon

    # the setting is checked as the node starts, as every declared one is
    with pytest.raises(ValueError, match="CRAWL_ID = 'a b': crawl id 'a b'"):
        CrawlIdMiddleware.from_crawler(crawler_with_addon(None, {"CRAWL_ID": "a b"}))


def test_a_dead_letter_is_replayed_into_the_crawl_it_came_from(frontier, crawls, redis_client):
    from extensions.frontier.deadletter import DeadLetters

    crawls.register("a")
    letters = DeadLetters(redis_client, "t:dlq", node_id="n1")
    request = {"url": "http://h/failed", "meta": {"crawl_id": "a", "retry_times": 3}}
    letters.add(kind="http", url=request["url"], error="500", request=json.dumps(request),
                crawl="a")  # fmt: skip
    assert crawls.figures("a").dlq == 1
    assert letters.replay(frontier, "host") == (1, 0)
    (lease,), _ = frontier.lease(5, lease_timeout=60)
    assert lease.member.startswith(b"h#a\n")
    assert json.loads(lease.data)["meta"] == {"crawl_id": "a"}  # fresh retries
