"""A changed scope swept through what is queued, on a real Redis: the
frontier's own queues, counters and leases."""

import hashlib
import json

from extensions.crawlid import crawl_fingerprint
from extensions.frontier.crawls.state import Crawls
from extensions.frontier.frontier import Frontier
from extensions.frontier.groups import queue_group_for
from extensions.keys import SpiderKeys
from extensions.scope.changes import Change, apply
from extensions.scope.document import parse
from extensions.scope.overflow_sweep import OverflowSweep
from extensions.scope.store import ScopeStore
from tests.test_overflow import drain, overflow_setup  # noqa: F401 - a fixture


def entry(url: str, crawl: str, seed: str = "http://h0/"):
    meta = {"crawl_id": crawl, "_scope": [seed, 1, 0, ""]}
    data = {"url": url, "meta": meta}
    fingerprint = crawl_fingerprint(hashlib.sha1(url.encode()).digest(), crawl)
    return (fingerprint, queue_group_for(url, meta), 0, json.dumps(data).encode())


def test_an_exclusion_removes_the_queued_matches_and_leaves_the_rest_and_the_leases(
    redis_client,
):
    keys = SpiderKeys.for_spider("sw")
    frontier = Frontier(redis_client, keys, "n1")
    crawls = Crawls(redis_client, keys)
    crawls.register("a")
    crawls.register("b")
    ScopeStore(redis_client, keys).set_crawl_scope("a", parse({"scope": "any"}))
    urls = [f"http://h{n % 3}/{'private' if n % 2 else 'public'}/{n}" for n in range(60)]
    frontier.enqueue([entry(url, "a") for url in urls])
    frontier.enqueue([entry(url, "b") for url in urls])  # another crawl: untouched
    leased, _ = frontier.lease(6, lease_timeout=60)
    leased_ids = {lease.member for lease in leased}
    queued_before = crawls.figures("a").queued

    scope, swept = apply(redis_client, keys, Change("a", exclude=["/private/"]))
    assert scope.exclude == ("/private/",)
    a = crawls.figures("a")
    assert swept.removed == a.removed > 0
    assert a.queued == queued_before - swept.removed
    # every private request of a that was queued is gone; the public ones stay
    left = [json.loads(v)["url"] for k in redis_client.scan_iter("sw:data:*#a")
            for v in redis_client.hvals(k)]  # fmt: skip
    in_flight_urls = {json.loads(lease.data)["url"] for lease in leased}
    assert {u for u in left if "/private/" in u} <= in_flight_urls
    assert {u for u in urls if "/public/" in u} <= set(left)
    b_leased = sum(1 for lease in leased if lease.member.partition(b"\n")[0].endswith(b"#b"))
    assert crawls.figures("b").queued == 60 - b_leased  # b has no scope: untouched
    assert ScopeStore(redis_client, keys).counts("a") == {"excluded": swept.removed}
    # what was leased is still leased, and finishes as ever
    assert set(redis_client.zrange(keys.leases("n1"), 0, -1)) >= leased_ids
    frontier.release(list(leased_ids))
    b = crawls.figures("b")
    assert frontier.sizes().queued == a.queued + b.queued


def test_with_the_overflow_what_mongodb_holds_of_the_crawl_is_judged_too(
    overflow_setup,  # noqa: F811 - the fixture imported above
):
    frontier, overflow = overflow_setup(name="swo", queue_max=5)
    keys, server = frontier.keys, frontier.server
    Crawls(server, keys).register("a")
    ScopeStore(server, keys).set_crawl_scope("a", parse({"scope": "any"}))
    urls = [f"http://h.test/{'private' if n % 2 else 'public'}/{n}" for n in range(40)]
    frontier.enqueue([entry(url, "a") for url in urls])
    overflow.turn()  # the spills written to MongoDB
    assert overflow.store.waiting_count("h.test#a") == 35

    sweeper = OverflowSweep(server, keys, overflow.store)
    _, swept = apply(server, keys, Change("a", exclude=["/private/"]), overflow=sweeper)
    assert swept.removed == 20
    figures = Crawls(server, keys).figures("a")
    assert (figures.queued, figures.removed) == (20, 20)
    assert overflow.store.waiting_count("h.test#a") + server.zcard(keys.queue("h.test#a")) == 20
    assert frontier.sizes().queued == 20
    # every public page comes back and is leased once; no private one ever is
    leased = drain(frontier, overflow)
    assert sorted(leased) == sorted(u for u in urls if "/public/" in u)
    sizes = frontier.sizes()
    assert (sizes.queued, sizes.spilled) == (0, 0)
    assert not server.exists(keys.named("overflow", group="h.test#a"))
