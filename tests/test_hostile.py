"""Hostile pages and poisoned entries: the node keeps crawling, what is refused
is counted (and, for entries, dead-lettered with its reason), nothing else is
lost, nothing local is read and no secret leaks."""

from __future__ import annotations

import json
import signal
import time

import pytest
import redis

from tests.conftest import queued, read_items, scrapy, site_hits


def dlq_records(client: redis.Redis, spider: str) -> list[dict]:
    return [json.loads(raw) for raw in client.lrange(f"{spider}:dlq", 0, -1)]


def redis_dump(client: redis.Redis) -> bytes:
    """Every key and value in Redis, as bytes to search for secrets."""
    out = []
    for key in client.scan_iter(count=1000):
        kind = client.type(key)
        out.append(key)
        if kind == b"string":
            out.append(client.get(key) or b"")
        elif kind == b"list":
            out.extend(client.lrange(key, 0, -1))
        elif kind == b"zset":
            out.extend(client.zrange(key, 0, -1))
        elif kind == b"hash":
            for field, value in client.hgetall(key).items():
                out += [field, value]
        elif kind == b"set":
            out.extend(client.smembers(key))
    return b"\n".join(out)


def test_a_hostile_site_reads_no_local_file_and_hangs_no_node(
    redis_url, redis_client, demo_site, nodes, tmp_path
):
    port = demo_site.url.rsplit(":", 1)[1]
    redis_client.lpush("site:start_urls", demo_site.url + "/hostile/")
    settings = {
        "MAX_IDLE_TIME_BEFORE_CLOSE": 2,
        "DOWNLOAD_MAXSIZE": 16 * 1024 * 1024,  # above the 300,000-link page
        "MAX_LINKS_PER_PAGE": 500,
        "ALLOWED_PORTS": port,
        "RETRY_TIMES": 1,
        "RETRY_BACKOFF_MAX": 0.5,
    }
    for node in ("h1", "h2"):
        nodes.start("site", redis_url, NODE_ID=node, **settings)
    assert nodes.wait(240) == [0, 0], nodes.tail()
    logs = nodes.log(0) + nodes.log(1)

    hits = site_hits(demo_site)
    ok_pages = {path for path in hits if path.startswith("/hostile/ok/")}
    # the three linked from the index, and the first 500 links of the big page
    assert ok_pages == {f"/hostile/ok/{n}" for n in range(500)} | {
        "/hostile/ok/1",
        "/hostile/ok/2",
        "/hostile/ok/3",
    }
    assert not any("credentials" in path or "aaaa" in path for path in hits)
    # each page once (robots.txt once per node); nothing retried for ever
    assert {path for path, n in hits.items() if n > 1} <= {"/hostile/huge", "/robots.txt"}

    items = read_items(tmp_path / "items")
    assert items, "the crawl stored nothing"
    assert all(item["url"].startswith(demo_site.url + "/hostile/") for item in items)
    assert not any("root:" in json.dumps(item) for item in items)

    def total(name: str) -> int:  # summed over both nodes: either may have met it
        return nodes.stat(0, name) + nodes.stat(1, name)

    # every kind of refusal counted, where it happened
    assert total("frontier/refused/scheme") >= 3  # file:// links and redirects, ftp
    assert total("frontier/refused/credentials") == 1
    assert total("frontier/refused/port") == 1  # the redirect to port 1
    assert total("links/over_limit") == 300_000 - 500
    # the 64 MB page was cut at 16 MB and dead-lettered with the reason
    huge = [r for r in dlq_records(redis_client, "site") if r["url"].endswith("/hostile/huge")]
    assert len(huge) == 1 and "DOWNLOAD_MAXSIZE" in huge[0]["error"], huge

    assert "Traceback" not in logs
    assert "leased by node" not in logs, "a node was blocked past its heartbeat"
    secrets = b"hunter2"
    assert secrets not in logs.encode()
    assert secrets not in redis_dump(redis_client)
    assert not queued(redis_client, "site")


BAD_QUEUE_ENTRIES = {
    "_class": {"_class": 5},
    "body": {"body": 5},
    "body64": {"body64": "!!not base64!!"},
    "headers": {"headers": {"X": 5}},
    "cookies": {"cookies": "yes"},
    "meta": {"meta": []},
    "delay_until": {"meta": {"delay_until": "tomorrow"}},
    "proxy": {"meta": {"proxy": 5}},
    "download_maxsize": {"meta": {"download_maxsize": "big"}},
    "encoding": {"encoding": "no-such-codec"},
    "method": {"method": "G E T"},
    "flags": {"flags": "x"},
    "priority_huge": {"priority": 10**30},
    "priority_text": {"priority": "high"},
    "dont_filter": {"dont_filter": "yes"},
    "callback_private": {"callback": "_private"},
    "callback_dunder": {"callback": "__init__"},
    "callback_api": {"callback": "start_requests"},
    "callback_missing": {"callback": "nope"},
    "unknown_field": {"shell": "rm -rf /"},
}


def test_poisoned_queue_entries_are_dead_lettered_and_the_rest_goes_on(
    redis_url, redis_client, demo_site, nodes
):
    entries = {}
    for name, fields in BAD_QUEUE_ENTRIES.items():
        entries[json.dumps({"url": f"{demo_site.url}/hostile/ok/{name}", **fields})] = 0
    entries[json.dumps({"url": demo_site.url + "/hostile/ok/good"})] = 0
    entries["not json at all"] = 0
    entries['["a", "list"]'] = 0
    redis_client.zadd("fromdata:requests", entries)
    nodes.start(
        "fromdata", redis_url, SPIDER_MODULES="tests.spiders", MAX_IDLE_TIME_BEFORE_CLOSE=1,
        FRONTIER_FETCH_BATCH=4,
    )  # fmt: skip
    assert nodes.wait(120) == [0], nodes.tail()

    hits = site_hits(demo_site)
    assert set(hits) - {"/robots.txt"} == {"/hostile/ok/good"}
    records = dlq_records(redis_client, "fromdata")
    assert len(records) == len(BAD_QUEUE_ENTRIES) + 2
    assert {r["kind"] for r in records} == {"unreadable"}
    by_url = {r["url"].rsplit("/", 1)[-1]: r["error"] for r in records if r["url"]}
    assert set(by_url) == set(BAD_QUEUE_ENTRIES)
    assert "delay_until" in by_url["delay_until"]
    assert "private" in by_url["callback_private"]
    assert "spider API" in by_url["callback_api"]
    assert all(r.get("raw") for r in records)  # kept as found, for a person to judge
    log = nodes.log(0)
    assert "Traceback" not in log
    assert redis_client.zcard("fromdata:requests") == 0  # the earlier layout, moved at open
    assert not queued(redis_client, "fromdata")
    assert redis_client.zcard("fromdata:leases:" + _node_of(redis_client, "fromdata")) == 0


def _node_of(client: redis.Redis, spider: str) -> str:
    return client.zrange(f"{spider}:nodes", 0, 0)[0].decode()


def test_poisoned_start_entries_are_dead_lettered_with_their_reason(
    redis_url, redis_client, demo_site, nodes, tmp_path
):
    base = demo_site.url + "/hostile/ok/"
    bad = {
        "proxy": {"url": base + "p", "meta": {"proxy": "http://127.0.0.1:1"}},
        "robots": {"url": base + "r", "meta": {"dont_obey_robotstxt": True}},
        "maxsize": {"url": base + "m", "meta": {"download_maxsize": 0}},
        "slot": {"url": base + "s", "meta": {"download_slot": "other-host"}},
        "delay": {"url": base + "d", "meta": {"delay_until": "x"}},
        "priority": {"url": base + "i", "priority": 10**30},
    }
    raw_bad = [json.dumps(entry) for entry in bad.values()]
    raw_bad.append('{"url": "' + base + 'f", "priority": 1e400}')
    raw_bad.append(base + "long-" + "a" * 100_000)
    raw_bad.append(demo_site.url.replace("://", "://admin:s3cret@") + "/hostile/ok/cred")
    raw_bad += [base + "skip", base + "boom"]  # the spider's override refuses these
    redis_client.lpush("fromdata:start_urls", *raw_bad, base + "good")
    nodes.start("fromdata", redis_url, SPIDER_MODULES="tests.spiders",
                MAX_IDLE_TIME_BEFORE_CLOSE=1)  # fmt: skip
    assert nodes.wait(120) == [0], nodes.tail()

    assert set(site_hits(demo_site)) - {"/robots.txt"} == {"/hostile/ok/good"}
    records = dlq_records(redis_client, "fromdata")
    assert len(records) == len(raw_bad)
    assert {r["kind"] for r in records} == {"start_url"}
    errors = " | ".join(r["error"] for r in records)
    for reason in ("'proxy' steers", "'dont_obey_robotstxt' steers", "'download_maxsize' steers",
                   "'download_slot' steers", "'delay_until' steers", "out of range",
                   "not an integer", "URLLENGTH_LIMIT", "user:password@", "made no request",
                   "RuntimeError: cannot handle this entry"):  # fmt: skip
        assert reason in errors, reason
    log = nodes.log(0)
    assert "Traceback" not in log
    assert "s3cret" not in log
    assert b"s3cret" not in redis_dump(redis_client)  # the dead letter masks it too
    assert all("s3cret" not in json.dumps(item) for item in read_items(tmp_path / "items"))
    assert redis_client.llen("fromdata:start_urls") == 0
    assert not list(redis_client.scan_iter("fromdata:start_leases:*"))


def test_seed_refuses_what_a_node_would_refuse(redis_url, redis_client):
    entries = [
        '{"url": "http://127.0.0.1:1/a", "meta": {"proxy": "http://evil:1"}}',
        '{"url": "http://127.0.0.1:1/a", "priority": 100000000000}',
        "http://user:pw@127.0.0.1:1/a",
        "http://127.0.0.1:1/" + "a" * 5000,
        "file:///etc/passwd",
    ]
    result = scrapy("seed", "site", *entries, "http://127.0.0.1:1/ok", "-s",
                    f"REDIS_URL={redis_url}")  # fmt: skip
    assert result.returncode == 1
    assert "pushed 1 start URLs to site:start_urls, refused 5" in result.stdout
    for reason in ("'proxy' steers", "out of range", "user:password@", "URLLENGTH_LIMIT",
                   "unsupported scheme 'file'"):  # fmt: skip
        assert reason in result.stderr, reason
    assert "pw@" not in result.stderr
    assert redis_client.lrange("site:start_urls", 0, -1) == [b"http://127.0.0.1:1/ok"]


def test_private_networks_refused_when_asked(redis_url, redis_client, demo_site, nodes):
    port = demo_site.url.rsplit(":", 1)[1]
    # an IP literal is refused as an entry; a name is refused once resolved
    redis_client.lpush("site:start_urls", demo_site.url + "/hostile/ok/ip",
                       f"http://localhost:{port}/hostile/ok/name")  # fmt: skip
    nodes.start("site", redis_url, MAX_IDLE_TIME_BEFORE_CLOSE=1, DENY_PRIVATE_NETWORKS=True)
    assert nodes.wait(120) == [0], nodes.tail()
    assert site_hits(demo_site) == {}
    assert nodes.stat(0, "urlpolicy/refused/private") >= 1
    records = dlq_records(redis_client, "site")
    assert [r["kind"] for r in records] == ["start_url"]
    assert "private, loopback" in records[0]["error"]


@pytest.mark.chaos
def test_kill_9_while_reading_start_urls_loses_none(redis_url, redis_client, demo_site, nodes):
    urls = [f"{demo_site.url}/hostile/ok/{n}" for n in range(3000)]
    for start in range(0, len(urls), 500):
        redis_client.lpush("site:start_urls", *urls[start : start + 500])
    settings = {"MAX_IDLE_TIME_BEFORE_CLOSE": 2, "REDIS_START_URLS_BATCH_SIZE": 50}
    first = nodes.start("site", redis_url, NODE_ID="reader", **settings)
    deadline = time.monotonic() + 60
    while redis_client.llen("site:start_urls") > 2500 and time.monotonic() < deadline:
        time.sleep(0.01)
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    taken = 3000 - redis_client.llen("site:start_urls")
    assert 0 < taken < 3000, "the kill came too late to prove anything"

    nodes.start("site", redis_url, NODE_ID="carries-on", **settings)
    nodes.procs.pop(0)  # the killed one has exited already
    assert nodes.wait(240) == [0], nodes.tail()
    hits = site_hits(demo_site)
    missing = [url for url in urls if url.removeprefix(demo_site.url) not in hits]
    assert missing == []
    assert "start URL entries taken by node reader" in nodes.log(1)
