"""The console's parts against a real Redis: what each view reads (and that its
cost does not grow with the crawl), the dead-letter filters and actions, the
per-minute series the heartbeats keep, and the login tokens."""

from __future__ import annotations

import json
import time

import pytest

import extensions
from extensions.cluster import series
from extensions.cluster.checkpoint import Checkpoint
from extensions.console import readers
from extensions.console.actions import ActionRefused, Actions, Choice
from extensions.console.auth import LOCAL, Sessions, User, Users, hash_password, verify_password
from extensions.frontier.crawls.state import Crawls
from extensions.frontier.ranks.state import RankBudget
from extensions.frontier.start_urls import DEFAULT_RULES
from extensions.keys import SpiderKeys
from tests.conftest import queue_requests

KEYS = SpiderKeys.for_spider("shop")
LIMITS = readers.Limits(node_timeout=15, stall_time=120, host_page_budget=0, series_hours=1,
                        dlq_scan=100_000)  # fmt: skip


def actions(client, scan: int = 100_000) -> Actions:
    return Actions(client, KEYS, queue_by="host", rules=DEFAULT_RULES, scan=scan, crawl_budget=0)


def fill(client, hosts: range, per_host: int) -> None:
    for host in hosts:
        requests = [json.dumps({"url": f"http://h{host}.test/p{n}"}) for n in range(per_host)]
        queue_requests(client, "shop", *requests)


def commands(client) -> int:
    return sum(stat["calls"] for stat in client.info("commandstats").values())


def test_each_view_costs_the_same_redis_commands_however_large_the_crawl(redis_client):
    Crawls(redis_client, KEYS).register("c1")
    views = {
        "spider": lambda: readers.spider_view(redis_client, KEYS, LIMITS),
        "hosts": lambda: readers.hosts(redis_client, KEYS, LIMITS),
        "ready hosts": lambda: readers.hosts(redis_client, KEYS, LIMITS, "ready", 20, 50),
        "dlq": lambda: readers.dead_letters(redis_client, KEYS, LIMITS, readers.LetterFilter()),
        "nodes": lambda: readers.nodes(redis_client, KEYS, LIMITS),
        "series": lambda: readers.series_of(redis_client, KEYS, LIMITS),
    }

    def costs() -> dict[str, int]:
        found = {}
        for name, view in views.items():
            view()  # scripts loaded, nothing left to warm
            before = commands(redis_client)
            view()
            found[name] = commands(redis_client) - before
        return found

    fill(redis_client, range(100), 2)
    small = costs()
    fill(redis_client, range(100, 5000), 4)  # 50 times the hosts, 100 times the requests
    redis_client.lpush("shop:dlq", *[json.dumps({"url": f"http://x/{n}"}) for n in range(5000)])
    assert int(redis_client.hget("shop:frontier", "queued")) == 200 + 4900 * 4
    assert costs() == small
    assert len(readers.hosts(redis_client, KEYS, LIMITS, "ready", 0, 50)["hosts"]) == 50


def test_the_hosts_window_pages_through_one_kind_and_finds_one_host(redis_client):
    fill(redis_client, range(30), 3)
    first = readers.hosts(redis_client, KEYS, LIMITS, "ready", 0, 20)
    second = readers.hosts(redis_client, KEYS, LIMITS, "ready", 20, 20)
    assert first["totals"]["ready"] == 30
    names = [row["host"] for row in first["hosts"] + second["hosts"]]
    assert sorted(names) == sorted(f"h{n}.test" for n in range(30))
    assert all(row["queued"] == 3 and row["state"] == "ready" for row in first["hosts"])
    one = readers.hosts(redis_client, KEYS, LIMITS, host="h7.test")["hosts"]
    assert [(row["host"], row["queued"]) for row in one] == [("h7.test", 3)]
    with pytest.raises(ValueError, match="state must be one of"):
        readers.hosts(redis_client, KEYS, LIMITS, "everything")


def test_the_hosts_window_groups_by_address_and_shows_the_lines(redis_client):
    fill(redis_client, range(6), 2)
    for n in range(6):
        described = {"dom": "test" if n < 4 else f"h{n}.test", "ip": f"10.0.0.{n % 2}", "ipx": 1}
        redis_client.hset(f"shop:host:h{n}.test", mapping=described)
    redis_client.zadd("shop:ip:10.0.0.1:line", {"h3.test": 1, "h5.test": 2})
    redis_client.hset("shop:ip:10.0.0.1", "next", int(time.time() * 1000) + 500)
    redis_client.zadd("shop:lines", {"shop:ip:10.0.0.1": 1})
    view = readers.hosts(redis_client, KEYS, LIMITS, "ready", 0, 20, group="address")
    assert [row["address"] for row in view["hosts"]] == ["10.0.0.0"] * 3 + ["10.0.0.1"] * 3
    assert view["group"] == "address"
    [line] = view["lines"]
    assert (line["kind"], line["name"], line["waiting"]) == ("address", "10.0.0.1", 2)
    assert line["next_slot"] > time.time()
    assert view["ranked"] == []  # no host ranked: no table
    redis_client.zadd("shop:hostrank", {"h1.test": 40, "h4.test": 3})
    redis_client.hset("shop:host:h1.test", "leased", 7)
    budget = readers.Limits(**{**LIMITS.__dict__, "rank_budget": RankBudget(10, 2, 50)})
    ranked = readers.hosts(redis_client, KEYS, budget, "ready", 0, 20)["ranked"]
    assert [(r["host"], r["rank"], r["leased"], r["budget"]) for r in ranked] == [
        ("h1.test", 40.0, 7, 50), ("h4.test", 3.0, 0, 16)
    ]  # fmt: skip
    odd = readers.hosts(redis_client, KEYS, LIMITS, "ready", 0, 20, group="<script>")
    assert odd["group"] == ""  # only the two groupings
    # scrapy status --ips reads the same; a malformed limit another writer left is none
    from extensions.observability.levels import level_rows

    redis_client.hset("shop:rates", "*ip", "fast")
    redis_client.hset("shop:ip:10.0.0.1", "next", "soon")
    rows = {row["address"]: row for row in level_rows(redis_client, KEYS, view["hosts"], "address")}
    assert rows["10.0.0.1"]["hosts"] == 3 and rows["10.0.0.1"]["line"] == 2
    assert rows["10.0.0.1"]["limit"] is None and rows["10.0.0.1"]["next_slot_in"] is None
    # a server held lately (two of its hosts refused) says why, for a minute
    redis_client.hset("shop:ip:10.0.0.0", mapping={"cut": int(time.time() * 1000), "why": "ban"})
    redis_client.hset("shop:ip:10.0.0.1", mapping={"cut": 1, "why": "push"})
    rows = {row["address"]: row for row in level_rows(redis_client, KEYS, view["hosts"], "address")}
    assert rows["10.0.0.0"]["server_refused"] == "ban"
    assert rows["10.0.0.1"]["server_refused"] is None


def letter(n: int, host: str, error: str, replayable: bool = True) -> str:
    url = f"http://{host}/item/{n}"
    record = {"kind": "retries_exhausted", "url": url, "error": error, "node": "n1",
              "time": time.time()}  # fmt: skip
    if replayable:
        record["request"] = json.dumps({"url": url, "meta": {"retry_times": 3}})
    return json.dumps(record)


def test_dead_letters_are_filtered_paged_replayed_and_deleted(redis_client):
    records = [letter(n, f"h{n % 3}.test", "503 Service Unavailable" if n % 2 else "timeout")
               for n in range(1200)]  # fmt: skip
    redis_client.rpush("shop:dlq", *records, b"\xff not json")
    by_host = readers.LetterFilter(host="h1.test")
    page = readers.dead_letters(redis_client, KEYS, LIMITS, by_host, offset=100, limit=50)
    assert (page["total"], page["matched"], page["complete"]) == (1201, 400, True)
    assert len(page["letters"]) == 50 and all("//h1.test/" in r["url"] for r in page["letters"])
    both = readers.LetterFilter(host="h1.test", reason="503")
    assert readers.dead_letters(redis_client, KEYS, LIMITS, both)["matched"] == 200
    text = readers.LetterFilter(q="/item/11")  # 11, 110..119, 1100..1199
    assert readers.dead_letters(redis_client, KEYS, LIMITS, text)["matched"] == 111
    bounded = readers.Limits(**{**vars(LIMITS), "dlq_scan": 300})
    seen = readers.dead_letters(redis_client, KEYS, bounded, by_host)
    assert (seen["scanned"], seen["complete"], seen["matched"]) == (300, False, 100)
    malformed = readers.dead_letters(redis_client, KEYS, LIMITS, readers.LetterFilter(), 1200, 5)
    assert malformed["letters"][0]["malformed"] is True

    # replay every letter matching a filter: queued with fresh retries, gone from the list
    result = actions(redis_client).replay("ana", Choice.from_json(
        {"all": True, "filter": {"host": "h1.test", "reason": "503"}}))  # fmt: skip
    assert result == {"replayed": 200, "not_replayable": 0}
    assert int(redis_client.hget("shop:frontier", "queued")) == 200
    assert redis_client.llen("shop:dlq") == 1001
    # delete the ones ticked, by id
    page = readers.dead_letters(redis_client, KEYS, LIMITS, readers.LetterFilter(), 0, 3)
    ids = [row["id"] for row in page["letters"]]
    assert actions(redis_client).delete("ana", Choice.from_json({"ids": ids})) == {"deleted": 3}
    assert redis_client.llen("shop:dlq") == 998
    # the unreadable one cannot be replayed, and stays
    chosen = Choice.from_json({"ids": [readers.letter_id(b"\xff not json")]})
    assert actions(redis_client).replay("ana", chosen) == {"replayed": 0, "not_replayable": 1}
    assert redis_client.llen("shop:dlq") == 998
    audit = [json.loads(r) for r in redis_client.lrange("shop:audit", 0, -1)]
    assert [a["action"] for a in audit] == ["dlq replay", "dlq delete", "dlq replay"]
    assert audit[2]["detail"].startswith('all matching {"reason": "503", "host": "h1.test"}')
    for bad in ({}, {"ids": "x"}, {"ids": [1]}, {"all": True, "filter": "x"}, []):
        with pytest.raises(ActionRefused):
            Choice.from_json(bad)


def test_crawl_actions_refuse_what_cannot_be_done(redis_client):
    acting = actions(redis_client)
    with pytest.raises(ActionRefused, match="no crawl 'nope'"):
        acting.crawl("ana", "pause", "nope")
    with pytest.raises(ActionRefused, match="stop takes a crawl under an id"):
        acting.crawl("ana", "stop", "")
    with pytest.raises(ActionRefused, match="no action 'explode'"):
        acting.crawl("ana", "explode", "")
    Crawls(redis_client, KEYS).register("c1")
    fill(redis_client, range(0), 0)
    assert acting.crawl("ana", "stop", "c1")["action"] == "stop"
    with pytest.raises(ActionRefused, match="crawl c1 is stopped"):
        acting.crawl("ana", "resume", "c1")
    with pytest.raises(ActionRefused, match="crawl c1 is stopped"):
        acting.seed("ana", {"urls": ["http://a.test/"], "crawl": "c1"})
    assert acting.crawl("ana", "pause", None)["crawl"] is None
    assert redis_client.hget("shop:crawls", "*") == b"paused"


def test_the_series_keeps_a_bounded_window_of_minutes(redis_client):
    hours, start = 1.0, 1_800_000_000.0
    for minute in range(150):  # two and a half windows of heartbeats
        pipe = redis_client.pipeline()
        series.add(pipe, KEYS.series, {"pages": 2, "items": 1, "errors": minute % 2}, start
                   + minute * 60, hours)  # fmt: skip
        pipe.execute()
    assert redis_client.hlen(KEYS.series) <= 60 * 3 + 3
    assert 0 < redis_client.ttl(KEYS.series) <= 3600
    redis_client.hset(KEYS.series, mapping={"junk": "1", "12:x": "5", "0:p": "7"})
    now = start + 149 * 60
    read = series.read(redis_client, KEYS.series, now, hours)
    assert len(read["minutes"]) == 60 and read["minutes"][-1] == int(now // 60) * 60
    assert read["pages"] == [2] * 60 and read["items"] == [1] * 60
    assert sum(read["errors"]) == 30
    assert series.sweep(redis_client, KEYS.series, now, hours) == 3  # junk, 12:x, 0:p
    assert redis_client.hlen(KEYS.series) == 60 + 60 + 30  # no field for a minute without errors


class Stats:
    def __init__(self, **values):
        self.values = values

    def get_stats(self):
        return self.values


def test_a_heartbeat_reports_memory_and_version_and_adds_to_the_minute(redis_client):
    beat = Checkpoint(redis_client, KEYS, "n1", series_hours=6)
    beat.write(Stats(response_received_count=5, item_scraped_count=4, **{"retry/delayed": 2}))  # type: ignore[arg-type]
    beat.write(Stats(response_received_count=8, item_scraped_count=4, **{"retry/delayed": 3}))  # type: ignore[arg-type]
    node = redis_client.hgetall("shop:node:n1")
    assert int(node[b"rss"]) > 10 * 2**20 and node[b"version"].decode() == extensions.__version__
    read = series.read(redis_client, KEYS.series, time.time(), 6)
    assert (sum(read["pages"]), sum(read["items"]), sum(read["errors"])) == (8, 4, 3)
    row = readers.nodes(redis_client, KEYS, LIMITS)[0]
    assert row["memory"] == int(node[b"rss"]) and row["version"] == extensions.__version__


def test_passwords_sessions_and_csrf_tokens():
    hashed = hash_password("pw", iterations=1000)
    assert verify_password("pw", hashed) and not verify_password("pW", hashed)
    assert not verify_password("pw", "plain") and not verify_password("pw", "a$b$c$d")
    users = Users("admin", "secret", {"viewer": {"password": hashed, "role": "read"}})
    assert users.check("admin", "secret") == User("admin", "admin")
    assert users.check("viewer", "pw") == User("viewer", "read")
    assert users.check("admin", "wrong") is None and users.check("ghost", "pw") is None
    assert not Users("admin", "", {}).login_required

    sessions = Sessions("k" * 32, hours=1)
    session, cookie = sessions.issue(User("ana", "read"))
    assert sessions.read(cookie) == session
    token = sessions.csrf_token(session)
    assert sessions.csrf_ok(session, token) and not sessions.csrf_ok(session, "x" + token[1:])
    assert not sessions.csrf_ok(session, None)
    forged = cookie.replace("|read|", "|admin|")
    assert sessions.read(forged) is None  # the signature no longer fits
    assert Sessions("another", 1).read(cookie) is None
    assert sessions.read("a|b|c") is None and sessions.read(None) is None
    _, old = Sessions("k" * 32, hours=-1).issue(LOCAL)
    assert sessions.read(old) is None  # expired


def test_a_login_sends_a_person_back_to_this_console_only():
    from extensions.console.app import _local

    assert _local("/shop/dlq?reason=503") == "/shop/dlq?reason=503"
    for elsewhere in ("//evil.test/", "/\t/evil.test", "/\\evil.test", "https://evil.test/", ""):
        assert _local(elsewhere) == "/"


def test_a_checked_hash_is_remembered_for_that_password_only():
    users = Users("admin", "", {"bot": {"password": hash_password("pw", 1000), "role": "read"}})
    assert users.check("bot", "pw") == User("bot", "read")
    assert users.check("bot", "pw") == User("bot", "read")  # from memory
    assert users.check("bot", "pW") is None and users.check("bot", "") is None
