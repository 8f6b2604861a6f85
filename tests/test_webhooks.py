"""Crawl events to a webhook receiver on loopback that verifies every one with
the Standard Webhooks library (``standardwebhooks``, the released one): two
crawls of one spider started, one paused and resumed, the other stopped, a node
killed -9 mid-crawl, a receiver that fails its first tries; each event told once
for the cluster, by its id. A URL that never answers 2xx gets the event in the
dead letters after its last try, and scrapy status says why meanwhile; entries
another writer left are no event."""

from __future__ import annotations

import base64
import json
import signal
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from demosite import catalog
from extensions.keys import SpiderKeys
from extensions.webhooks.delivery import Outbox
from extensions.webhooks.events import CrawlEvents, event_type
from servers import services
from tests.conftest import scrapy
from tests.helpers import wait_for

SECRET = "whsec_" + base64.b64encode(b"a key the tests sign with 0123456789").decode()


class Receiver:
    """A webhook endpoint: answers 500 to its first ``fail_first`` requests,
    then 204 to each it can verify (401 to one it cannot)."""

    def __init__(self, fail_first: int = 0, always: int = 0):
        self.verified: list[dict] = []
        self.refused: list[str] = []
        self.requests = 0
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                data = self.rfile.read(int(self.headers.get("content-length", 0)))
                with receiver.lock:
                    receiver.requests += 1
                    first = receiver.requests <= fail_first
                if always or first:
                    self.send_response(always or 500)
                    self.end_headers()
                    return
                try:
                    event = Webhook(SECRET).verify(data, dict(self.headers))
                except WebhookVerificationError as exc:
                    receiver.refused.append(str(exc))
                    self.send_response(401)
                else:
                    with receiver.lock:
                        receiver.verified.append({"id": self.headers["webhook-id"], **event})
                    self.send_response(204)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hooks"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def told(self) -> set[tuple[str, str | None]]:
        with self.lock:
            return {(event["type"], event["data"]["crawl"]) for event in self.verified}

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    started = Receiver(fail_first=3)
    yield started
    started.stop()


@pytest.mark.parametrize(
    ("before", "after", "kind"),
    [
        ("", "running", "crawl.started"),
        ("", "paused", "crawl.started"),
        ("running", "paused", "crawl.paused"),
        ("paused", "running", "crawl.resumed"),
        ("running", "finished", "crawl.completed"),
        ("paused", "stopped", "crawl.failed"),
        ("running", "expired", "crawl.failed"),
        ("finished", "running", "crawl.started"),
        ("", "finished", ""),
        ("running", "running", ""),
    ],
)
def test_a_crawls_state_change_is_the_event_it_names(before, after, kind):
    assert event_type(before, after) == kind


def test_every_event_is_told_once_for_the_cluster_signed_across_a_kill_and_a_failing_receiver(
    redis_url, redis_client, receiver, nodes
):
    # c1: a shop of 151 pages at 10 a second (its Crawl-delay), paused early on;
    # c2: a slow shop that cannot end before it is stopped
    site = services.start_demo_site(crawl_delay=0.1, categories=1)
    slow = services.start_demo_site(latency=2.0, host="127.0.0.2")
    try:
        for crawl, url in (("c1", site.url), ("c2", slow.url)):
            result = scrapy("seed", "shop", "--crawl", crawl, url + "/",
                            "-s", f"REDIS_URL={redis_url}")  # fmt: skip
            assert result.returncode == 0, result.stderr
        hooks = {"WEBHOOK_URLS": receiver.url, "WEBHOOK_SECRET": SECRET,
                 "WEBHOOK_PAGE_EVENTS": True, "MAX_IDLE_TIME_BEFORE_CLOSE": 2}  # fmt: skip
        for n in (1, 2):
            nodes.start("shop", redis_url, NODE_ID=f"n{n}", **hooks)
        command = ("-s", f"REDIS_URL={redis_url}")
        wait_for(lambda: {("crawl.started", "c1"), ("crawl.started", "c2")} <= receiver.told(),
                 60, "both crawls' start told, past the receiver's failures")  # fmt: skip
        assert scrapy("pause", "shop", "--crawl", "c1", *command).returncode == 0
        wait_for(lambda: ("crawl.paused", "c1") in receiver.told(), 30, "the pause told")
        nodes.procs[0].send_signal(signal.SIGKILL)  # a node that told events, killed
        nodes.procs[0].wait(10)
        nodes.start("shop", redis_url, NODE_ID="n3", **hooks)
        assert scrapy("stop", "shop", "--crawl", "c2", *command).returncode == 0
        wait_for(lambda: ("crawl.failed", "c2") in receiver.told(), 30, "the stop told")
        assert scrapy("resume", "shop", "--crawl", "c1", *command).returncode == 0
        assert nodes.wait(180) == [-signal.SIGKILL, 0, 0], nodes.tail()
    finally:
        site.stop()
        slow.stop()

    assert receiver.requests > len(receiver.verified) >= 6 and not receiver.refused
    pages = [e for e in receiver.verified if e["type"] == "crawl.pages"]
    by_id: dict[str, set] = {}
    for event in receiver.verified:
        if event["type"] == "crawl.pages":
            continue
        by_id.setdefault(event["id"], set()).add((event["type"], event["data"]["crawl"]))
    # a repeat (a node killed between an answer and its acknowledgement) has its id
    assert all(len(told) == 1 for told in by_id.values()), by_id
    assert sorted(told for (told,) in by_id.values()) == sorted([
        ("crawl.started", "c1"), ("crawl.started", "c2"), ("crawl.paused", "c1"),
        ("crawl.failed", "c2"), ("crawl.resumed", "c1"), ("crawl.completed", "c1"),
    ])  # fmt: skip
    completed = next(e for e in receiver.verified if e["type"] == "crawl.completed")
    assert completed["data"]["spider"] == "shop"
    assert completed["data"]["figures"]["done"] == len(catalog.expected_pages(1) - {"/about"})
    assert completed["data"]["figures"]["state"] == "finished"
    # every page of c1 told once in crawl.pages events, across the kill (a page
    # the killed node fetched and never released was fetched again, told then)
    first = {e["id"]: e for e in pages}
    told = [
        p["url"] for e in first.values() if e["data"]["crawl"] == "c1" for p in e["data"]["pages"]
    ]
    assert len(told) == len(set(told)) == completed["data"]["figures"]["done"]
    assert all(len(e["data"]["pages"]) == e["data"]["figures"]["pages"] for e in pages)
    failed = next(e for e in receiver.verified if e["type"] == "crawl.failed")
    assert failed["data"]["reason"] == "stopped (scrapy stop)"
    # what is left in the outbox is what the killed node took and never acknowledged:
    # another node takes it over CLAIM_AFTER (30 s) later, and the crawls may have
    # ended sooner; it waits for the next node, its id telling a repeat
    pending = redis_client.xpending("shop:webhooks", "senders")
    owners = {c["name"].decode() if isinstance(c["name"], bytes) else c["name"]
              for c in pending["consumers"]}  # fmt: skip
    assert redis_client.xlen("shop:webhooks") == pending["pending"]
    assert owners <= {"n1"}, pending
    assert redis_client.llen("shop:webhooks:dead") == 0


def test_an_event_no_try_delivers_is_dead_lettered_and_a_malformed_entry_is_kept(
    redis_url, redis_client
):
    down = Receiver(always=503)
    try:
        keys = SpiderKeys.for_spider("shop")
        outbox = Outbox(redis_client, keys, "n1", SECRET, retries=1, timeout=5)
        outbox.open()
        event = {"id": "evt_1", "type": "crawl.started", "url": down.url, "body": "{}"}
        redis_client.xadd("shop:webhooks", {**event, "attempt": "0"})
        redis_client.xadd("shop:webhooks", {"junk": "no event"})
        redis_client.zadd("shop:webhooks:later", {"not json": 0})
        assert outbox.send_due() == 2
        status = scrapy("status", "shop", "-s", f"REDIS_URL={redis_url}").stdout
        assert "webhooks: 1 events to send (last failure: HTTP 503), 2 dead-lettered" in status
        wait_for(lambda: outbox.send_due() >= 0 and redis_client.llen("shop:webhooks:dead") >= 3,
                 10, "the retry, then the dead letter")  # fmt: skip
        dead = [json.loads(raw) for raw in redis_client.lrange("shop:webhooks:dead", 0, -1)]
    finally:
        down.stop()
    errors = sorted(record["error"] for record in dead)
    assert errors == ["HTTP 503", "not an event", "not an event: no id, url, body"], dead
    delivered = next(record for record in dead if record.get("id") == "evt_1")
    assert delivered["attempts"] == 2 and down.requests == 2
    assert redis_client.xlen("shop:webhooks") == 0 and not redis_client.zcard("shop:webhooks:later")


def test_a_state_another_writer_left_is_told_afresh_not_a_stuck_crawl(redis_url, redis_client):
    result = scrapy(
        "seed", "shop", "--crawl", "c1", "http://shop.test/", "-s", f"REDIS_URL={redis_url}"
    )
    assert result.returncode == 0, result.stderr
    redis_client.hset("shop:webhooks:states", "c1", "running not-a-count")
    events = CrawlEvents(redis_client, SpiderKeys.for_spider("shop"), ["http://hooks.test/"])
    assert events.look() == ["crawl.started"]  # its queued start: running, from nothing known
    assert redis_client.hget("shop:webhooks:states", "c1") == b"running 1"
    assert events.look() == []


def test_pages_are_bundled_into_an_event_per_crawl_once_full_or_waited_for(redis_client):
    from extensions.webhooks.pages import PageBundles

    now = int(time.time() * 1000)
    for crawl, n in (("c1", 1), ("c1", 2), ("c2", 3), ("c1", 4)):
        page = {"url": f"http://shop.test/{n}", "crawl": crawl, "dead_lettered": n == 2, "at": now}
        redis_client.rpush("shop:webhooks:pages", json.dumps(page))
    redis_client.rpush("shop:webhooks:pages", "not a page")
    bundles = PageBundles(
        redis_client, SpiderKeys.for_spider("shop"), ["http://a/", "http://b/"], 3
    )
    assert bundles.bundle() == 2  # a full batch of 3: c1's two, c2's one
    assert bundles.bundle() == 0  # one page and the junk: not full, not old
    assert bundles.bundle(force=True) == 1
    entries = redis_client.xrange("shop:webhooks")
    assert len(entries) == 6  # three events, to two URLs each
    bodies = {e[1][b"id"]: json.loads(e[1][b"body"]) for e in entries}
    told = sorted((b["data"]["crawl"], [p["url"][-1] for p in b["data"]["pages"]],
                   b["data"]["figures"]["dead_lettered"]) for b in bodies.values())  # fmt: skip
    assert told == [("c1", ["1", "2"], 1), ("c1", ["4"], 0), ("c2", ["3"], 0)]
    dead = [json.loads(raw) for raw in redis_client.lrange("shop:webhooks:dead", 0, -1)]
    assert [d["error"] for d in dead] == ["not a page"]
    assert redis_client.llen("shop:webhooks:pages") == 0
