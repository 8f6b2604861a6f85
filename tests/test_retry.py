"""Retries with backoff that wait in Redis, and the dead-letter queue."""

import json
import random
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from extensions.downloadermiddlewares.retry import (
    PAYMENT_HEADERS_KEPT,
    backoff_delay,
    parse_retry_after,
    payment_terms,
)
from tests import conftest
from tests.conftest import crawler_with_addon, scrapy
from tests.helpers import FLAKY_SETTINGS, page_hits, site_times


def test_retry_after_forms():
    assert parse_retry_after(b"7") == 7
    when = datetime.now(UTC) + timedelta(seconds=30)
    assert 25 <= parse_retry_after(format_datetime(when, usegmt=True)) <= 31
    assert parse_retry_after(b"soon") is None
    assert parse_retry_after(None) is None


@pytest.mark.parametrize("attempt", [1, 2, 3, 6, 12])
def test_full_jitter_stays_within_the_capped_exponential(attempt):
    rng = random.Random(attempt)
    bound = min(30.0, 0.5 * 2 ** (attempt - 1))
    samples = [backoff_delay(attempt, base=0.5, cap=30.0, rng=rng) for _ in range(2000)]
    assert all(0 <= s <= bound for s in samples)
    # spread over the whole range, not bunched at the top like a fixed delay
    assert min(samples) < bound * 0.05
    assert max(samples) > bound * 0.95


def test_flaky_pages_recover_and_hopeless_ones_are_dead_lettered(
    redis_url, redis_client, demo_site, nodes, tmp_path
):
    redis_client.lpush("site:start_urls", demo_site.url + "/flaky/")
    # the flaky pages alone: a host that pushes back is slowed, and its whole shop with it
    nodes.start("site", redis_url, spider_args={"allow": "/flaky/"}, **FLAKY_SETTINGS)
    assert nodes.wait(120) == [0], nodes.tail()

    hits = page_hits(demo_site)
    times = site_times(demo_site)
    for n in (1, 2, 3):
        assert hits[f"/flaky/503-twice/{n}"] == 3
        assert hits[f"/flaky/timeout-once/{n}"] == 2
        assert hits[f"/flaky/500/{n}"] == 3  # the first try and RETRY_TIMES retries
        first, second = times[f"/flaky/429/{n}"]
        assert second - first >= 2 - 0.05, "Retry-After: 2 was not respected"

    from tests.conftest import read_items

    stored = {item["url"].removeprefix(demo_site.url) for item in read_items(tmp_path / "items")}
    recovered = {f"/flaky/{kind}/{n}" for kind in ("503-twice", "429", "timeout-once")
                 for n in (1, 2, 3)}  # fmt: skip
    assert recovered <= stored
    assert not any(path.startswith("/flaky/500/") for path in stored)

    letters = [json.loads(raw) for raw in redis_client.lrange("site:dlq", 0, -1)]
    assert sorted(letter["url"].removeprefix(demo_site.url) for letter in letters) == [
        "/flaky/500/1", "/flaky/500/2", "/flaky/500/3",
    ]  # fmt: skip
    for letter in letters:
        assert letter["kind"] == "retries_exhausted"
        assert letter["error"] == "HTTP 500"
        assert letter["status"] == 500
        assert letter["retry_times"] == 2
        assert letter["method"] == "GET"
        assert len(letter["fingerprint"]) == 40
        assert letter["first_failure"] < letter["last_failure"]
        assert letter["node"]
    assert redis_client.zcard("site:delayed") == 0


def test_dlq_list_replay_purge(redis_url, redis_client, demo_site, nodes):
    redis_client.lpush("site:start_urls", demo_site.url + "/flaky/", "ftp://nowhere/")
    nodes.start("site", redis_url, spider_args={"allow": "/flaky/"}, **FLAKY_SETTINGS)
    assert nodes.wait(120) == [0], nodes.tail()
    settings = ("-s", f"REDIS_URL={redis_url}")

    listed = scrapy("dlq", "site", "list", "--json", *settings)
    assert listed.returncode == 0, listed.stderr
    records = [json.loads(line) for line in listed.stdout.splitlines()]
    assert len(records) == 4
    assert all({"url", "error"} <= set(r) for r in records)
    text = scrapy("dlq", "site", "list", "--limit", "1", *settings)
    assert len(text.stdout.splitlines()) == 1

    replay = scrapy("dlq", "site", "replay", "--limit", "2", *settings)
    assert replay.returncode == 0, replay.stderr
    assert "replayed 2 requests into the queue of site" in replay.stdout
    assert "1 records hold no valid request" in replay.stdout
    queued = [json.loads(raw) for raw in conftest.queued(redis_client, "site")]
    assert len(queued) == 2
    assert all("retry_times" not in q.get("meta", {}) for q in queued)
    assert redis_client.llen("site:dlq") == 2

    # A node picks the replayed requests up and gives them fresh retries.
    before = page_hits(demo_site)
    nodes.start("site", redis_url, spider_args={"allow": "/flaky/"}, **FLAKY_SETTINGS)
    assert nodes.wait(120)[1] == 0, nodes.tail()
    after = page_hits(demo_site)
    assert sum(after.values()) - sum(before.values()) == 2 * 3
    assert redis_client.llen("site:dlq") == 4

    purge = scrapy("dlq", "site", "purge", *settings)
    assert "purged 4 records from site:dlq" in purge.stdout
    assert redis_client.llen("site:dlq") == 0
    assert scrapy("dlq", "site", "explode", *settings).returncode == 2


def test_a_waiting_retry_survives_restarts_and_runs_when_due(
    redis_url, redis_client, demo_site, nodes
):
    due = time.time() + 3
    retry = {"url": demo_site.url + "/about", "dont_filter": True, "meta": {"retry_times": 1}}
    redis_client.zadd("shop:delayed", {json.dumps(retry): int(due * 1000)})
    nodes.start("shop", redis_url, MAX_IDLE_TIME_BEFORE_CLOSE=1)
    assert nodes.wait(60) == [0], nodes.tail()
    assert page_hits(demo_site) == {"/about": 1}
    assert site_times(demo_site)["/about"][0] >= due - 0.05


def test_a_parked_retry_and_a_dead_letter_carry_the_request_as_leased(redis_url, redis_client):
    from scrapy import Request, Spider
    from scrapy.http import Response

    from extensions.downloadermiddlewares.retry import BackoffRetryMiddleware
    from extensions.frontier.leased import leased_for

    class Retrying(Spider):
        name = "retrying"

    crawler = crawler_with_addon(Retrying, {"REDIS_URL": redis_url, "RETRY_TIMES": 1})
    crawler.spider = crawler._create_spider()
    middleware = BackoffRetryMiddleware.from_crawler(crawler)
    remember_as_leased = leased_for(crawler).remember  # what the scheduler calls

    def fetched(request: Request, agent: str) -> Response:
        """As the downloader leaves it: the spider's header, and its middlewares' own."""
        remember_as_leased(request)
        request.headers["User-Agent"] = agent
        request.headers["Accept-Language"] = "en"
        return Response(request.url, status=503, request=request)

    request = Request("http://127.0.0.1:1/p", headers={"X-Spider": "mine"})
    retry = middleware.process_response(request, fetched(request, "Rotated/1"))
    assert isinstance(retry, Request) and retry is not request
    assert dict(retry.headers) == {b"X-Spider": [b"mine"]}  # the next fetch adds its own
    assert request.headers["User-Agent"] == b"Rotated/1"  # the fetched request is left as it was

    response = fetched(retry, "Rotated/2")
    assert middleware.process_response(retry, response) is response  # retries used up
    letter = json.loads(redis_client.lindex("retrying:dlq", 0))
    assert json.loads(letter["request"])["headers"] == {"X-Spider": ["mine"]}
    assert retry.headers["User-Agent"] == b"Rotated/2"


@pytest.mark.unit
def test_a_402s_price_headers_are_kept_and_bounded():
    from scrapy.http import Headers

    headers = Headers({
        "Crawler-Price": "USD 0.01", "WWW-Authenticate": 'Payment realm="x"',
        "Content-Type": "text/html", "Server": "nginx", "X-Payment-Required": "x" * 1000,
    })  # fmt: skip
    terms = payment_terms(headers)
    assert "Crawler-Price: USD 0.01" in terms and 'Www-Authenticate: Payment realm="x"' in terms
    assert "Server" not in terms and "Content-Type" not in terms
    assert "X-Payment-Required: " + "x" * 300 in terms and "x" * 301 not in terms
    many = Headers({f"X-Price-{n}": "1" for n in range(50)})
    assert payment_terms(many).count("X-Price-") == PAYMENT_HEADERS_KEPT
    assert payment_terms(Headers({"Server": "x"})) == ""
