"""The Redis frontier at the unit level, against a real Redis."""

import hashlib
import json

import pytest

from extensions.frontier.frontier import Frontier, now_ms
from extensions.frontier.groups import group_for
from extensions.frontier.sent import SentFingerprints
from extensions.frontier.upkeep import Upkeep
from extensions.keys import SpiderKeys

SLOW_MARGIN_MS = 100  # a fifth of a 500 ms interval: a slow host's slots keep it too


def entry(url: str, priority: int = 0, fingerprint: bytes | str | None = None):
    data = {"url": url}
    if priority:
        data["priority"] = priority
    fp = hashlib.sha1(url.encode()).digest() if fingerprint is None else fingerprint
    return (fp, group_for(url), priority, json.dumps(data).encode())


def url_of(leased: tuple[bytes, bytes]) -> str:
    """The URL of a leased request: (lease member GROUP newline ID, its JSON)."""
    member, data = leased.member, leased.data
    url = json.loads(data)["url"]
    assert member.partition(b"\n")[0].decode() == group_for(url)
    return url


def lease_urls(frontier: Frontier, count: int) -> list[str]:
    leased, _ = frontier.lease(count, lease_timeout=60)
    return [url_of(pair) for pair in leased]


@pytest.fixture
def keys():
    return SpiderKeys.for_spider("t")


def test_enqueue_skips_seen_fingerprints(redis_client, keys):
    frontier = Frontier(redis_client, keys, "n1")
    assert (
        frontier.enqueue([entry("http://a/1"), entry("http://a/2"), entry("http://a/1")]).new == 2
    )
    assert frontier.enqueue([entry("http://a/2"), entry("http://a/3")]).new == 1
    sizes = frontier.sizes()
    assert (sizes.queued, sizes.seen) == (3, 3)


def test_dont_filter_skips_the_seen_check(redis_client, keys):
    frontier = Frontier(redis_client, keys, "n1")
    frontier.enqueue([entry("http://a/1")])
    assert frontier.enqueue([entry("http://a/1?again", fingerprint="")]).new == 1
    assert frontier.sizes().seen == 1


def test_lease_moves_best_priority_first_and_keeps_it_leased(redis_client, keys):
    frontier = Frontier(redis_client, keys, "n1")
    frontier.enqueue([entry("http://a/low"), entry("http://a/high", priority=5)])
    leased, _ = frontier.lease(1, lease_timeout=60)
    assert url_of(leased[0]) == "http://a/high"
    sizes = frontier.sizes()
    assert (sizes.queued, sizes.in_flight) == (1, 1)
    assert redis_client.zscore(keys.nodes, "n1") is not None

    frontier.release([lease.member for lease in leased])
    assert frontier.sizes().in_flight == 0
    # the JSON went with the lease; the other request's is still there
    assert redis_client.hlen(keys.data("a")) == 1


def test_dead_nodes_leases_return_to_the_queue_with_their_priority(redis_client, keys):
    dead = Frontier(redis_client, keys, "dead")
    alive = Frontier(redis_client, keys, "alive")
    dead.enqueue([entry("http://a/1", priority=3), entry("http://a/2")])
    dead.lease(2, lease_timeout=600)
    redis_client.rpush(keys.start_leases("dead"), b"http://a/start")  # taken, not yet queued
    alive.heartbeat()
    assert not alive.reclaim(node_timeout=30)  # "dead" beat just now
    redis_client.zadd(keys.nodes, {"dead": now_ms() - 60_000})

    returned = alive.reclaim(node_timeout=30)
    assert (returned.requests, returned.start_urls) == ({"dead": 2}, {"dead": 1})
    assert redis_client.lrange(keys.start_urls, 0, -1) == [b"http://a/start"]
    sizes = alive.sizes()
    assert (sizes.queued, sizes.in_flight, sizes.start_urls) == (2, 0, 1)
    assert lease_urls(alive, 1) == ["http://a/1"]  # priority 3 kept


def test_expired_leases_of_a_live_node_return(redis_client, keys):
    frontier = Frontier(redis_client, keys, "n1")
    frontier.enqueue([entry("http://a/1")])
    frontier.lease(1, lease_timeout=-1)  # already past its deadline
    assert frontier.reclaim(node_timeout=30).requests == {"n1": 1}
    assert frontier.sizes().queued == 1


@pytest.mark.parametrize("how", ["dead", "expired"])
def test_a_reclaim_call_returns_a_bounded_batch_and_reclaim_returns_them_all(
    redis_client, keys, how
):
    """A node that died holding many leases is emptied over several short calls."""
    dead = Frontier(redis_client, keys, "dead")
    dead.enqueue([entry(f"http://a/{i}") for i in range(10)] + [entry("http://b/1")])
    timeout = 600 if how == "dead" else -1
    for _ in range(20):  # every lease taken, however the lease batches fall
        if not dead.sizes().queued:
            break
        dead.lease(11, lease_timeout=timeout)
    assert dead.sizes().in_flight == 11
    redis_client.zadd(keys.nodes, {"dead": now_ms() - (60_000 if how == "dead" else 0)})
    other = Frontier(redis_client, keys, "other")
    other.reclaim_batch = 3
    [result] = other._reclaim_once(now_ms() - 30_000, "", 3600, False)
    assert (sum(int(n) for n in result["requests"][1::2]), int(result["more"])) == (3, 1)
    assert other.reclaim(node_timeout=30).requests == {"dead": 8}
    assert other.sizes().queued == 11 and other.sizes().in_flight == 0


def test_closing_node_hands_back_everything(redis_client, keys):
    frontier = Frontier(redis_client, keys, "n1")
    frontier.enqueue([entry(f"http://a/{i}") for i in range(5)])
    frontier.lease(3, lease_timeout=600)
    assert frontier.reclaim(node_timeout=30, closing_node="n1").requests == {"n1": 3}
    assert frontier.sizes().queued == 5


def test_state_survives_a_new_frontier_object(redis_client, keys):
    """A restarted node (a new Frontier on the same Redis) sees the same crawl."""
    first = Frontier(redis_client, keys, "n1")
    first.enqueue([entry(f"http://a/{i}") for i in range(4)])
    first.lease(1, lease_timeout=600)
    again = Frontier(redis_client, keys, "n2")
    sizes = again.sizes()
    assert (sizes.queued, sizes.in_flight, sizes.seen) == (3, 1, 4)
    assert again.enqueue([entry("http://a/0")]).new == 0


def test_clear_keeps_start_urls_and_dead_letters(redis_client, keys):
    frontier = Frontier(redis_client, keys, "n1")
    frontier.enqueue([entry("http://a/1")])
    frontier.lease(1, lease_timeout=600)
    redis_client.lpush(keys.start_urls, "http://a/")
    redis_client.lpush(keys.dlq, "{}")
    redis_client.xadd(keys.holds, {"g": "a", "u": "1"})
    # the recrawl state its package declares goes with the crawl
    redis_client.hset(keys.named("revisit"), "ab", "a\n{}")
    redis_client.zadd(keys.named("due"), {"ab": 1})
    Upkeep(frontier).clear()
    sizes = frontier.sizes()
    assert (sizes.queued, sizes.in_flight, sizes.seen) == (0, 0, 0)
    assert not redis_client.exists(keys.holds, keys.named("revisit"), keys.named("due"))
    assert (sizes.start_urls, sizes.dlq) == (1, 1)


def test_an_idle_lease_says_when_the_next_retry_is_due(redis_client, keys):
    frontier = Frontier(redis_client, keys, "n1")
    assert frontier.lease(4, lease_timeout=60) == ([], None)
    frontier.delay([(2_000_000_000.5, "a", b'{"url":"http://a/later"}')])
    assert frontier.lease(4, lease_timeout=60) == ([], 2_000_000_000.5)
    frontier.delay([(1.0, "a", b'{"url":"http://a/due"}')])
    items, _ = frontier.lease(4, lease_timeout=60)
    assert [lease.data for lease in items] == [b'{"url":"http://a/due"}']
    assert frontier.sizes().delayed == 1


def test_exact_dupefilter_never_confuses_fingerprints_sharing_a_bucket(redis_client, keys):
    """Fingerprints in one bucket, and a tail that spans two stored ones, stay distinct."""
    frontier = Frontier(redis_client, keys, "n1")
    first, second = b"AB" + b"x" * 6 + b"y" * 6, b"AB" + b"y" * 6 + b"z" * 6
    spanning = b"AB" + b"y" * 12  # the end of one stored tail and the start of the next
    padding = b"\0" * 6  # Scrapy's fingerprints are longer than what is kept
    assert frontier.enqueue([(fp + padding, "g", 0, fp) for fp in (first, second)]).new == 2
    assert frontier.enqueue([(spanning + padding, "g", 0, spanning)]).new == 1
    again = [(fp + padding, "g", 0, b"again") for fp in (first, second, spanning)]
    assert frontier.enqueue(again).new == 0
    assert frontier.sizes().seen == 3


def test_nodes_silent_for_long_are_forgotten_once_their_leases_are_back(redis_client, keys):
    ancient = Frontier(redis_client, keys, "ancient")
    ancient.enqueue([entry("http://a/x")])
    ancient.lease(1, lease_timeout=600)
    frontier = Frontier(redis_client, keys, "alive")
    frontier.heartbeat()
    redis_client.zadd(keys.nodes, {"recent": now_ms() - 60_000, "ancient": now_ms() - 3_600_000})
    redis_client.hset(keys.node("ancient"), "pages", 1)
    assert frontier.reclaim(node_timeout=30, forget_after=600).requests == {"ancient": 1}
    assert {n.decode() for n in redis_client.zrange(keys.nodes, 0, -1)} == {"alive", "recent"}
    assert not redis_client.exists(keys.node("ancient"))
    assert frontier.sizes().queued == 1


def test_sent_fingerprints_forget_only_a_whole_old_generation():
    sent = SentFingerprints(2)
    assert sent.add(b"a") and sent.add(b"b")
    assert not sent.add(b"a")
    assert sent.add(b"c")  # a full generation {a, b} becomes the previous one
    assert not sent.add(b"a") and not sent.add(b"c")
    assert sent.add(b"d")
    assert sent.add(b"e")  # {c, d} is previous now: a and b are forgotten
    assert sent.add(b"a")  # sent again; the shared dupefilter drops it
    sent.clear()
    assert sent.add(b"c")
    off = SentFingerprints(0)
    assert off.add(b"a") and off.add(b"a")


def test_within_a_priority_requests_leave_in_the_order_they_were_found(redis_client, keys):
    frontier = Frontier(redis_client, keys, "n1")
    found = ["http://a/zebra", "http://a/apple", "http://a/mango", "http://a/banana"]
    for url in found:  # one flush each, as a crawl finds them
        frontier.enqueue([entry(url)])
    frontier.enqueue([entry("http://a/urgent", priority=1)])
    assert lease_urls(frontier, 5) == ["http://a/urgent", *found]


def test_across_ready_hosts_priority_first_then_each_host_gets_a_fair_share(redis_client, keys):
    frontier = Frontier(redis_client, keys, "n1")
    frontier.enqueue([entry(f"http://big/{i}") for i in range(100)])
    frontier.enqueue([entry(f"http://small/{i}") for i in range(5)])
    frontier.enqueue([entry("http://vip/1", priority=7)])
    first = lease_urls(frontier, 10)
    assert first[0] == "http://vip/1"
    assert {u for u in first if "small" in u} == {f"http://small/{i}" for i in range(4)}
    second = lease_urls(frontier, 10)
    assert "http://small/4" in second  # the small host is done after two leases
    assert redis_client.zrange(keys.ready, 0, -1) == [b"big"]
    assert frontier.sizes().queued == 106 - 20


def test_a_rate_limited_host_is_handed_out_once_per_interval_and_no_request_waits(
    redis_client, keys
):
    frontier = Frontier(redis_client, keys, "n1")
    redis_client.hset(keys.rates, mapping={"*": 0, "slow": 2})  # 2 requests/s
    frontier.enqueue([entry(f"http://slow/{i}") for i in range(10)])
    frontier.enqueue([entry(f"http://free/{i}") for i in range(3)])
    urls = lease_urls(frontier, 10)
    assert sorted(urls) == ["http://free/0", "http://free/1", "http://free/2", "http://slow/0"]
    before = now_ms()
    assert frontier.lease(10, lease_timeout=60)[0] == []
    _, next_due = frontier.lease(10, lease_timeout=60)
    # leased again a lead before its next slot, one interval (and the tolerance) on
    spacing = 500 * (1 + frontier.send_tolerance) + SLOW_MARGIN_MS
    assert next_due is not None and 0 < next_due * 1000 - before <= spacing
    assert redis_client.zcard(keys.delayed) == 0  # nothing parked: it waits in its queue
    frontier.enqueue([entry("http://slow/new")])  # found meanwhile: waits with its host
    assert frontier.lease(10, lease_timeout=60)[0] == []
    # a changed rate applies to the next lease once the host's wait is over
    redis_client.hset(keys.rates, "slow", 1000)
    redis_client.zadd(keys.waiting, {"slow": now_ms() - 1})
    assert len(lease_urls(frontier, 10)) == 10


def test_a_paced_host_s_leases_carry_send_slots_one_spacing_apart(redis_client, keys):
    """A lease hands a paced host's request out with the time it may be sent; the
    next lease of that host (by any node) gets the slot after. A slow host's
    first slot is a lead ahead (its window is strict), a fast host's is now."""
    from extensions.frontier.frontier import LEASE_LEAD_MS

    first = Frontier(redis_client, keys, "n1")
    second = Frontier(redis_client, keys, "n2", host_affinity=0)  # any node's turn
    redis_client.hset(keys.rates, mapping={"*": 0, "slow": 2, "fast": 20})
    urls = [f"http://slow/{i}" for i in range(3)] + [f"http://fast/{i}" for i in range(3)]
    first.enqueue([entry(url) for url in urls] + [entry("http://free/0")])
    before = now_ms()
    leases, _ = first.lease(10, lease_timeout=60)
    slots = {url_of(lease).split("/")[2]: lease for lease in leases}
    assert sorted(slots) == ["fast", "free", "slow"] and not slots["free"].slot
    slow, fast = slots["slow"], slots["fast"]
    assert before + LEASE_LEAD_MS <= slow.slot * 1000 <= now_ms() + LEASE_LEAD_MS
    assert before <= fast.slot * 1000 <= now_ms()
    assert slow.window * 1000 == pytest.approx(500 * first.send_tolerance, abs=1)
    assert fast.window * 1000 >= 25  # a busy node's timers fire that late
    redis_client.zadd(keys.waiting, {"slow": now_ms() - 1})  # its wait is over
    [later] = [lease for lease in second.lease(10, lease_timeout=60)[0] if b"slow" in lease.member]
    spacing = 500 * (1 + first.send_tolerance) + SLOW_MARGIN_MS
    assert abs(later.slot - slow.slot - spacing / 1000) < 0.002
    assert not later.watched  # it never pushed back


def test_a_crawl_delay_holds_its_host_up_to_the_cap(redis_client, keys):
    frontier = Frontier(redis_client, keys, "n1", crawl_delay_max=0.2)
    redis_client.hset(keys.crawl_delay, "polite", 3600)  # asks for an hour; capped
    frontier.enqueue([entry(f"http://polite/{i}") for i in range(3)])
    assert lease_urls(frontier, 5) == ["http://polite/0"]
    wait = redis_client.zscore(keys.waiting, "polite") - now_ms()
    assert 0 < wait <= 200 * (1 + frontier.send_tolerance) + 200 * 0.2  # and its margin


def test_the_host_budget_holds_across_nodes_and_says_what_it_dropped(redis_client, keys):
    one = Frontier(redis_client, keys, "n1", budget=3)
    two = Frontier(redis_client, keys, "n2", budget=3)
    assert one.enqueue([entry(f"http://b/{i}") for i in range(2)]).over_budget == ()
    added = two.enqueue([entry(f"http://b/{i}") for i in range(2, 5)] + [entry("http://c/1")])
    assert (added.new, added.over_budget) == (4, ("b", "b"))
    assert frontier_queued(redis_client, keys, "b") == 3
    assert redis_client.hget(keys.host("b"), "dropped:budget") == b"2"
    assert one.enqueue([entry("http://b/9")]).over_budget == ("b",)
    assert one.sizes().queued == 4


def frontier_queued(redis_client, keys, group: str) -> int:
    return redis_client.zcard(keys.queue(group))


def test_the_single_queue_of_earlier_versions_is_moved_into_host_queues(redis_client, keys):
    redis_client.zadd(keys.requests, {b'{"url":"http://a/1","priority":2}': -2,
                                      b'{"url":"http://b/1"}': 0, b"not json": 0})  # fmt: skip
    frontier = Frontier(redis_client, keys, "n1")
    assert Upkeep(frontier).convert_legacy_queue(lambda stored: group_for(stored["url"])) == 3
    assert not redis_client.exists(keys.requests)
    assert frontier.sizes().queued == 3
    leased, _ = frontier.lease(5, lease_timeout=60)
    assert leased[0][1] == b'{"url":"http://a/1","priority":2}'
    assert b"not json" in [lease.data for lease in leased]  # dead-lettered by the node


def test_requests_are_grouped_by_host_domain_or_download_slot():
    url = "http://Shop.Example.co.uk:8080/a"
    assert group_for(url) == "shop.example.co.uk"
    assert group_for(url, by="domain") == "example.co.uk"
    assert group_for("http://a.b.example.com/", by="domain") == "example.com"
    assert group_for("http://10.0.0.7/", by="domain") == "10.0.0.7"
    assert group_for(url, "10.0.0.7", by="slot") == "10.0.0.7"
    assert group_for(url, None, by="slot") == "shop.example.co.uk"
    assert group_for(url, "evil\nslot", by="slot") == "evil slot"  # never splits a lease
    assert group_for("not a url") == ""


def test_a_request_json_is_written_once_and_leases_move_its_id(redis_client, keys):
    frontier = Frontier(redis_client, keys, "n1")
    frontier.enqueue([entry("http://a/1")])
    [request_id] = redis_client.zrange(keys.queue("a"), 0, -1)
    assert json.loads(redis_client.hget(keys.data("a"), request_id))["url"] == "http://a/1"
    [(member, data, *_)] = frontier.lease(1, lease_timeout=-1)[0]
    assert member == b"a\n" + request_id and json.loads(data)["url"] == "http://a/1"
    assert redis_client.zrange(keys.leases("n1"), 0, -1) == [member]
    # handed back (its deadline passed): the id returns; its JSON never moved
    assert frontier.reclaim(node_timeout=30).requests == {"n1": 1}
    assert redis_client.zrange(keys.queue("a"), 0, -1) == [request_id]
    # a late release of the lease handed back leaves the JSON for whoever leases it next
    frontier.release([member])
    anyone = Frontier(redis_client, keys, "n2", host_affinity=0)  # not n1's host for it
    assert lease_urls(anyone, 1) == ["http://a/1"]


def test_a_crawl_of_earlier_versions_is_upgraded_once_and_then_read_as_any(redis_client, keys):
    """Whole-JSON queue and lease members (with their group, or without it) become
    ids with their JSON in the data hash, keeping their order; then the crawl is
    marked, and a second upgrade reads one field."""
    inline = b'{"url":"http://a/old","priority":1}'
    redis_client.zadd(keys.queue("a"), {inline: -5, b'{"url":"http://a/older"}': -9})
    redis_client.zadd(keys.ready, {"a": -9})
    redis_client.zadd(
        keys.leases("gone"), {b'a\n{"url":"http://a/held"}': 1, b'{"url":"http://b/x"}': 2}
    )
    frontier = Frontier(redis_client, keys, "n1")
    done = Upkeep(frontier).upgrade(lambda stored: group_for(stored["url"]))
    assert done == {"requests": 0, "inline": 4, "fingerprints": 0}
    assert not [m for m in redis_client.zrange(keys.queue("a"), 0, -1) if m.startswith(b"{")]
    assert sorted(redis_client.zrange(keys.leases("gone"), 0, -1))[0].startswith(b"a\n")
    assert Upkeep(frontier).upgrade(lambda stored: group_for(stored["url"]))["inline"] == 0
    assert lease_urls(frontier, 1) == ["http://a/older"]  # the lowest score first, as before
    redis_client.zadd(keys.nodes, {"gone": now_ms() - 60_000})
    assert frontier.reclaim(node_timeout=30).requests == {"gone": 2}
    assert sorted(lease_urls(frontier, 5)) == ["http://a/held", "http://a/old", "http://b/x"]


def test_an_id_without_its_json_is_leased_with_none_for_the_node_to_dead_letter(redis_client, keys):
    frontier = Frontier(redis_client, keys, "n1")
    frontier.enqueue([entry("http://a/1"), entry("http://a/2")])
    first = redis_client.zrange(keys.queue("a"), 0, 0)[0]
    redis_client.hdel(keys.data("a"), first)  # lost, or never written by a foreign writer
    leased, _ = frontier.lease(5, lease_timeout=60)
    assert leased[0][1] == b""
    assert json.loads(leased[1][1])["url"] == "http://a/2"
