"""``scrapy status``, run as a user runs it."""

import json

from extensions.frontier.frontier import now_ms
from tests.conftest import queue_requests, queued, scrapy


def test_status_shows_frontier_and_nodes(redis_url, redis_client):
    redis_client.lpush("shop:start_urls", "http://127.0.0.1:1/")
    queue_requests(redis_client, "shop", '{"url":"http://127.0.0.1:1/a"}')
    redis_client.hset("shop:dupefilter", "n", 2)  # the dupefilter's count of fingerprints
    redis_client.zadd("shop:nodes", {"live": now_ms(), "gone": now_ms() - 3_600_000})
    redis_client.hset("shop:node:live", mapping={"pages": 10, "items": 7, "state": "running"})
    redis_client.zadd("shop:leases:gone", {'{"url":"http://127.0.0.1:1/b"}': 1e15})
    redis_client.zadd("shop:delayed", {'127.0.0.1\n{"url":"http://127.0.0.1:1/c"}': 1e15})
    redis_client.hset("shop:checkpoint", mapping={"pages": 40, "items": 30, "started": 1.5})

    result = scrapy("status", "shop", "--json", "-s", f"REDIS_URL={redis_url}")
    assert result.returncode == 0, result.stderr
    status = json.loads(result.stdout)
    wanted = ("pages", "items", "start_urls", "queued", "in_flight", "delayed", "seen", "dlq")
    assert {k: status[k] for k in wanted} == {
        "pages": 40, "items": 30, "start_urls": 1, "queued": 1, "in_flight": 1, "delayed": 1,
        "seen": 2, "dlq": 0,
    }  # fmt: skip
    nodes = {node["node"]: node for node in status["nodes"]}
    assert nodes["live"]["alive"] is True
    assert (nodes["live"]["pages"], nodes["live"]["items"]) == (10, 7)
    assert nodes["gone"]["state"] == "dead"
    assert nodes["gone"]["in_flight"] == 1

    text = scrapy("status", "shop", "-s", f"REDIS_URL={redis_url}")
    assert text.returncode == 0
    assert "queued 1   in flight 1   delayed 1   dead-lettered 0   start URLs 1" in text.stdout
    assert "gone" in text.stdout and "dead" in text.stdout
    assert "0/2 done (0.0%)" in text.stdout


def test_progress_with_recrawls_counts_fetches_not_a_share_over_100_percent(
    redis_url, redis_client
):
    redis_client.hset("shop:dupefilter", "n", 4)
    redis_client.hset("shop:checkpoint", mapping={"pages": 7, "done": 7, "started": 1.5})
    text = scrapy("status", "shop", "-s", f"REDIS_URL={redis_url}")
    assert text.returncode == 0, text.stderr
    assert "7 fetches of 4 pages discovered (recrawls)" in text.stdout
    assert "%" not in text.stdout.splitlines()[0]


def test_status_of_an_unknown_spider_is_a_usage_error(redis_url):
    result = scrapy("status", "nosuch", "-s", f"REDIS_URL={redis_url}")
    assert result.returncode == 2
    assert "no spider named 'nosuch'" in result.stderr


def test_status_and_dlq_survive_malformed_records(redis_url, redis_client):
    settings = ("-s", f"REDIS_URL={redis_url}")
    good_request = json.dumps({"url": "http://127.0.0.1:1/ok"})
    redis_client.lpush(
        "shop:dlq",
        "not json",
        "[1, 2]",
        json.dumps({"kind": "failed", "url": 5, "error": None, "time": "later",
                    "request": json.dumps({"url": "http://127.0.0.1:1/x", "callback": 7})}),
        json.dumps({"kind": "failed", "url": "http://127.0.0.1:1/ok", "error": "HTTP 500",
                    "request": good_request}),
    )  # fmt: skip
    redis_client.zadd("shop:nodes", {"odd": now_ms()})
    redis_client.hset("shop:node:odd", mapping={"pages": "many", "pid": "x", "started": "?"})
    redis_client.hset("shop:checkpoint", mapping={"pages": "nan", "done": "lots"})

    status = scrapy("status", "shop", *settings)
    assert status.returncode == 0, status.stderr
    assert json.loads(scrapy("status", "shop", "--json", *settings).stdout)["dlq"] == 4

    listed = scrapy("dlq", "shop", "list", *settings)
    assert listed.returncode == 0, listed.stderr
    assert len(listed.stdout.splitlines()) == 2
    assert "skipped 2 malformed records" in listed.stderr

    replay = scrapy("dlq", "shop", "replay", *settings)
    assert replay.returncode == 0, replay.stderr
    assert "replayed 1 requests" in replay.stdout  # the callback of 7 is not re-queued
    assert "3 records hold no valid request" in replay.stdout
    assert queued(redis_client, "shop") == [good_request.replace(" ", "").encode()]
