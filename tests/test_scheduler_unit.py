"""The scheduler in-process, on a real Redis: no HTTP, no subprocess.

Built with Scrapy's ``get_crawler``; what it writes is read back from Redis.
"""

from __future__ import annotations

import hashlib
import json
import time
from types import SimpleNamespace

import pytest
import redis
from scrapy import Request, Spider
from scrapy.utils.test import get_crawler

from extensions.frontier.idle import each_turn
from extensions.frontier.scheduler import DistributedScheduler
from extensions.frontier.start_urls import tracker_for
from extensions.meta import DELAY_UNTIL, START_ENTRY
from tests.conftest import queued

ADDON = {"ADDONS": {"extensions.addon.DistributedAddon": 0}}


class UnitSpider(Spider):
    name = "unit"

    def parse(self, response):
        pass


def open_scheduler(redis_url: str, **settings) -> DistributedScheduler:
    crawler = get_crawler(
        UnitSpider, {"REDIS_URL": redis_url, "NODE_ID": "unit-node", **ADDON, **settings}
    )
    crawler._apply_settings()  # the add-on installs the stack's settings
    crawler.spider = UnitSpider.from_crawler(crawler)
    crawler.engine = crawler._create_engine()  # Scrapy's own, not opened: nothing in flight
    opened = DistributedScheduler.from_crawler(crawler)
    opened.open(crawler.spider)
    return opened


def stop_loops(opened: DistributedScheduler) -> None:
    for loop in opened.node.loops:
        if loop.running:
            loop.stop()


@pytest.fixture
def scheduler(redis_url):
    opened = open_scheduler(redis_url)
    yield opened
    stop_loops(opened)


def test_on_a_sharded_frontier_writes_go_again_until_the_release_after_them_is_in(
    redis_url, redis_client
):
    """Two round trips, writes then release: the release failing (here the
    checkpoint is not a hash; in life a primary failing over, which may lose the
    writes it acknowledged) keeps both in the node, and the next flush sends both."""
    scheduler = open_scheduler(redis_url, FRONTIER_SHARDS=2)
    try:
        scheduler.enqueue_request(Request("http://example.com/parent"))
        scheduler.node.flush()
        parent = None
        for _ in range(4):  # a sharded lease looks through the shards in turn
            parent = scheduler.next_request()
            if parent is not None:
                break
        assert parent is not None and parent.url == "http://example.com/parent"
        # its callback done
        scheduler.node.pending.release.append(scheduler.node.leased.pop(parent))
        scheduler.node.pending.done += 1
        scheduler.enqueue_request(Request("http://example.com/child"))
        redis_client.delete("unit:checkpoint")
        redis_client.rpush("unit:checkpoint", "not a hash")
        scheduler.node.flush()
        assert [json.loads(e[-1])["url"] for e in scheduler.node.pending.enqueue] == [
            "http://example.com/child"
        ]
        assert len(scheduler.node.pending.release) == 1

        redis_client.delete("unit:checkpoint")
        scheduler.node.flush()
        assert scheduler.node.pending.enqueue == scheduler.node.pending.release == []
        shard = scheduler.node.keys.shard(scheduler.node.keys.shard_of("example.com"))
        assert redis_client.zcard(shard.queue("example.com")) == 1  # the child, once
        urls = [json.loads(raw)["url"] for raw in redis_client.hvals(shard.data("example.com"))]
        assert urls == ["http://example.com/child"]  # the parent's data went with its lease
        assert redis_client.zcard(shard.leases("unit-node")) == 0
    finally:
        stop_loops(scheduler)


def dlq(client) -> list[dict]:
    return [json.loads(raw) for raw in client.lrange("unit:dlq", 0, -1)]


def test_what_cannot_be_queued_is_refused_or_dead_lettered_and_the_rest_goes_in(
    scheduler, redis_client
):
    assert scheduler.enqueue_request(Request("http://example.com/good"))
    assert not scheduler.enqueue_request(Request("file:///etc/passwd"))
    huge = Request("http://example.com/huge-priority", priority=10**30)
    assert not scheduler.enqueue_request(huge)
    not_a_time = Request("http://example.com/not-a-time", meta={DELAY_UNTIL: "soon"})
    assert not scheduler.enqueue_request(not_a_time)
    too_far = Request("http://example.com/too-far", meta={DELAY_UNTIL: time.time() + 10**9})
    assert not scheduler.enqueue_request(too_far)
    scheduler.node.flush()

    assert [json.loads(raw)["url"] for raw in queued(redis_client, "unit")] == [
        "http://example.com/good"
    ]
    errors = {r["url"].rsplit("/", 1)[1]: r["error"] for r in dlq(redis_client)}
    assert set(errors) == {"huge-priority", "not-a-time", "too-far"}
    assert "out of range" in errors["huge-priority"]
    assert "FRONTIER_MAX_DELAY" in errors["too-far"]
    assert scheduler.node.stats.get_value("frontier/refused/scheme") == 1


def test_an_entry_redis_refuses_is_dead_lettered_and_the_others_written_once(
    scheduler, redis_client
):
    redis_client.zadd("unit:leases:unit-node", {b'{"url":"http://example.com/leased"}': 1e15})
    scheduler.enqueue_request(Request("http://example.com/a"))
    scheduler.node.pending.delay.append(
        (time.time() + 5, "example.com", b'{"url":"http://example.com/later"}')
    )
    # A priority Redis refuses (the checks above keep it from happening; this is the net).
    scheduler.node.pending.enqueue.append(
        ("", "example.com", "not a number", b'{"url":"http://example.com/nan"}')
    )
    scheduler.node.pending.release.append(b'{"url":"http://example.com/leased"}')
    scheduler.node.pending.done = 2
    scheduler.node.flush()
    scheduler.node.flush()  # nothing left over to write twice

    assert len(queued(redis_client, "unit")) == 1
    assert redis_client.zrange("unit:delayed", 0, -1) == [
        b'example.com\n{"url":"http://example.com/later"}'
    ]
    assert redis_client.zcard("unit:leases:unit-node") == 0
    assert int(redis_client.hget("unit:checkpoint", "done")) == 1  # 2 done - 1 parked, once
    [record] = dlq(redis_client)
    assert record["kind"] == "refused_by_redis" and "/nan" in record["raw"]


def test_a_start_entry_leaves_its_lease_with_the_write_of_its_requests(scheduler, redis_client):
    raw = b"http://example.com/start"
    redis_client.rpush("unit:start_leases:unit-node", raw, b"http://example.com/other")
    requests = [Request("http://example.com/start"), Request("http://example.com/start2")]
    tracker = tracker_for(scheduler.node.crawler)
    tracker.track(raw, requests, START_ENTRY)

    scheduler.enqueue_request(requests[0])
    scheduler.node.flush()
    assert redis_client.llen("unit:start_leases:unit-node") == 2  # one request still to come
    scheduler.enqueue_request(requests[1])
    scheduler.enqueue_request(requests[1].replace(url="http://example.com/start2"))  # a repeat
    scheduler.node.flush()
    assert redis_client.lrange("unit:start_leases:unit-node", 0, -1) == [
        b"http://example.com/other"
    ]
    stored = [json.loads(raw) for raw in queued(redis_client, "unit")]
    assert len(stored) == 2
    assert all(START_ENTRY not in r.get("meta", {}) for r in stored)  # never leaves the node


def test_a_closing_node_gives_its_start_leases_back(scheduler, redis_client):
    redis_client.rpush(
        "unit:start_leases:unit-node", b"http://example.com/1", b"http://example.com/2"
    )
    redis_client.lpush("unit:start_urls", b"http://example.com/newer")
    scheduler.close("shutdown")
    # back at the read end, oldest first: they are read before newer entries
    assert redis_client.rpop("unit:start_urls", 3) == [
        b"http://example.com/1",
        b"http://example.com/2",
        b"http://example.com/newer",
    ]


def test_at_close_a_status_batch_still_in_its_thread_is_stored_and_its_leases_released(
    redis_url, redis_client, mongo_db
):
    from extensions.recrawl.revisits import revisits_for

    uri, database, db = mongo_db
    crawler = get_crawler(
        UnitSpider,
        {"REDIS_URL": redis_url, "NODE_ID": "unit-node", "RECRAWL_STORE": "mongo",
         "MONGO_URI": uri, "MONGO_DATABASE": database, **ADDON},
    )  # fmt: skip
    crawler._apply_settings()
    crawler.spider = UnitSpider.from_crawler(crawler)
    crawler.engine = crawler._create_engine()
    crawler.engine._slot = SimpleNamespace(inprogress=set())  # the engine is done with all
    scheduler = DistributedScheduler.from_crawler(crawler)
    scheduler.open(crawler.spider)
    for loop in scheduler.node.loops:
        loop.stop()
    for path in ("/a", "/b"):
        scheduler.enqueue_request(Request("http://example.com" + path))
    scheduler.node.flush()
    fetched = [scheduler.next_request(), scheduler.next_request()]
    pending = revisits_for(crawler).pending  # as the recrawl middleware leaves them
    for request in fetched:
        pending[request] = (request.url[-1] * 40, "example.com", time.time() + 60,
                            json.dumps({"url": request.url}).encode())  # fmt: skip
    scheduler.node._collect_finished()
    # as StatusBatches.write leaves a batch whose worker thread has not returned yet
    from extensions.recrawl.part import RecrawlPart

    statuses = scheduler.node.parts.get(RecrawlPart).statuses
    statuses.in_flight, statuses.pending = statuses.pending, []
    assert len(statuses.in_flight) == 2

    scheduler.close("shutdown")

    assert {doc["url"] for doc in db["unit_status"].find()} == {
        "http://example.com/a", "http://example.com/b"
    }  # fmt: skip
    assert redis_client.zcard("unit:leases:unit-node") == 0
    assert queued(redis_client, "unit") == []  # released, not handed back to be fetched again
    statuses._written(None, [])  # the thread's late answer changes nothing
    assert scheduler.node.pending.release == []


def test_a_crawls_done_count_and_items_go_with_the_release_of_its_pages(scheduler, redis_client):
    from extensions.crawlid import item_counts

    scheduler.enqueue_request(Request("http://example.com/p", meta={"crawl_id": "job"}))
    scheduler.node.flush()
    assert redis_client.hget("unit:crawls", "job") == b"running"  # met, so registered
    page = scheduler.next_request()
    assert page is not None and page.meta["crawl_id"] == "job"
    # the engine is done with it (its callback yielded two items)
    member = scheduler.node.leased.pop(page)
    scheduler.node.parts.call("finished", page)  # as _collect_finished does
    scheduler.node.pending.finish(page, member)
    item_counts(scheduler.node.crawler)["job"] = 2
    scheduler.node.flush()
    record = redis_client.hgetall("unit:crawl:job")
    assert (record[b"done"], record[b"items"], record[b"in_flight"]) == (b"1", b"2", b"0")
    assert b"updated" in record
    assert redis_client.hget("unit:checkpoint", "done") == b"1"
    assert scheduler.node.stats.get_value("frontier/released") == 1


def test_a_request_of_a_crawl_that_cannot_be_queued_is_dead_lettered_in_its_crawl(
    scheduler, redis_client
):
    bad = Request("http://example.com/p", priority=10**12, meta={"crawl_id": "job"})
    assert scheduler.enqueue_request(bad) is False
    (record,) = dlq(redis_client)
    assert (record["kind"], record["crawl"]) == ("invalid_request", "job")
    assert redis_client.hget("unit:crawl:job", "dlq") == b"1"
    # a crawl id that is not one is refused, with the reason
    assert scheduler.enqueue_request(Request("http://a/", meta={"crawl_id": "a b"})) is False
    assert "crawl id 'a b'" in dlq(redis_client)[0]["error"]


def test_a_flush_or_heartbeat_that_fails_unexpectedly_runs_again_at_its_next_turn(
    scheduler, redis_client
):
    """Twisted stops a LoopingCall whose function raises: a node whose heartbeat
    stopped that way would have its leases taken by the others while it still
    fetched them. Each turn is guarded instead."""
    node = scheduler.node
    assert [loop.f for loop in node.loops] == [each_turn] * 2
    duties = [loop.a[1] for loop in node.loops]
    assert duties == [node.flush, node.duties.heartbeat]

    def hostile() -> None:
        raise ValueError("a record no node wrote")

    each_turn(node.stats, hostile)
    assert node.stats.get_value("frontier/duty_errors") == 1
    redis_client.zrem("unit:nodes", "unit-node")
    each_turn(node.stats, node.duties.heartbeat)  # the next turn beats as ever
    assert redis_client.zscore("unit:nodes", "unit-node") is not None


def test_a_node_that_cannot_read_the_frontier_sizes_still_beats(scheduler, redis_client):
    """A dead-letter list another program overwrote with a string makes the sizes
    fail; the node is alive all the same, and its leases stay its own."""
    redis_client.set("unit:dlq", "not a list")
    with pytest.raises(redis.ResponseError):
        scheduler.node.frontier.sizes(in_turn=True)
    redis_client.zrem("unit:nodes", "unit-node")
    scheduler.node.duties.heartbeat()  # the failure is reported, not raised
    assert redis_client.zscore("unit:nodes", "unit-node") is not None


def test_after_a_silence_of_its_own_a_node_takes_no_leases_of_a_node_as_silent(
    scheduler, redis_client
):
    """Redis stalled (or this node's loop was blocked) for longer than NODE_TIMEOUT:
    the other node could not beat either. Its leases stay its own for a beat's
    time; a node still silent after that is dead and its leases go back."""
    from extensions.frontier.frontier import Frontier, now_ms
    from tests.test_frontier import entry

    node = scheduler.node
    other = Frontier(redis_client, node.keys, "other-node")
    other.enqueue([entry(f"http://other.test/{i}") for i in range(3)])
    assert len(other.lease(3, lease_timeout=600)[0]) == 3
    silence = node.config.node_timeout + 5
    redis_client.zadd("unit:nodes", {"other-node": now_ms() - int(silence * 1000)})
    node.duties._beat_in = time.time() - silence  # this node's last beat, as long ago

    node.duties.heartbeat()
    assert other.sizes().in_flight == 3  # both were silent: none of its leases taken

    node.duties.heartbeat()  # a beat later it is still silent: gone
    assert other.sizes().in_flight == 0 and other.sizes().queued == 3
    assert node.stats.get_value("frontier/reclaimed") == 3


def test_requests_a_node_found_after_an_empty_lease_go_in_without_waiting_its_back_off(
    scheduler,
):
    node = scheduler.node
    node.polling.look_again_now()
    assert scheduler.next_request() is None  # the frontier is empty: the node backs off
    for _ in range(8):  # to its longest (a second), however loaded the machine
        node.polling.back_off(time.monotonic(), None)
    assert scheduler.next_request() is None  # (and does not ask Redis again meanwhile)
    assert not node.polling.due(time.monotonic())
    # a response that was still in flight yields a link: it is written and leased
    # back at the next ask, not after the back-off (up to a second at the end of a crawl)
    assert scheduler.enqueue_request(Request("http://found.test/1"))
    request = scheduler.next_request()
    assert request is not None and request.url == "http://found.test/1"


class HeaderFingerprinter:
    """A project's own fingerprint, which reads more than the URL."""

    def fingerprint(self, request):
        return hashlib.sha1(request.url.encode() + request.headers.get("Variant", b"")).digest()


def test_a_get_sent_before_is_dropped_before_anything_is_computed_for_it_again(
    scheduler, redis_client
):
    fingerprinter = scheduler.node.fingerprinter
    fingerprinted: list[str] = []
    fingerprint = fingerprinter.fingerprint
    fingerprinter.fingerprint = lambda r: fingerprinted.append(r.url) or fingerprint(r)
    page = "http://example.com/a?utm_source=feed"
    assert scheduler.enqueue_request(Request(page))
    assert not scheduler.enqueue_request(Request(page))  # as written before: no fingerprint
    assert not scheduler.enqueue_request(Request("http://example.com/a"))  # normalized alike
    assert scheduler.enqueue_request(Request(page, method="POST", body=b"q=1"))
    assert scheduler.enqueue_request(Request(page, dont_filter=True))
    # a crawl id that is no string: dead-lettered as before, never looked up
    assert not scheduler.enqueue_request(Request(page, meta={"crawl_id": ["x"]}))
    assert fingerprinted == ["http://example.com/a"] * 3
    scheduler.node.flush()
    assert len(queued(redis_client, "unit")) == 3
    assert scheduler.node.stats.get_value("dupefilter/filtered_locally") == 2
    assert "crawl id" in dlq(redis_client)[0]["error"]


def test_a_fingerprint_that_reads_more_than_the_url_is_asked_for_every_request(
    redis_url, redis_client
):
    scheduler = open_scheduler(
        redis_url, REQUEST_FINGERPRINTER_CLASS=f"{__name__}.HeaderFingerprinter"
    )
    try:
        for variant in ("a", "b", "a"):
            scheduler.enqueue_request(Request("http://example.com/", headers={"Variant": variant}))
        scheduler.node.flush()
        assert len(queued(redis_client, "unit")) == 2
    finally:
        stop_loops(scheduler)
