"""Proxy rotation through a real local forward proxy, dead proxies on closed ports."""

import json
import time

import pytest
from scrapy import Request, Spider
from scrapy.http import HtmlResponse
from scrapy.settings import Settings

from extensions.downloadermiddlewares.proxies import BanPolicy, proxy_label, proxy_list
from extensions.frontier.serializer import dumps_request
from servers import services
from tests.conftest import crawler_with_addon, read_items
from tests.helpers import ALLOW, SECRET, good_pages, proxied, with_credentials


@pytest.fixture
def live_proxy(tmp_path):
    proxy = services.start_forward_proxy(auth=f"crawler:{SECRET}", log=tmp_path / "proxy.log")
    yield proxy
    proxy.stop()


def dead_proxy() -> str:
    return f"http://crawler:{SECRET}@127.0.0.1:{services.free_port()}"


def test_proxy_list_sources(tmp_path):
    assert proxy_list(Settings({"ROTATING_PROXY_LIST": ["http://a:1", " "]}), {}) == ["http://a:1"]
    listing = tmp_path / "proxies.txt"
    listing.write_text("# exits\nhttp://u:p@b:2\n\nc:3\n")
    settings = Settings({"ROTATING_PROXY_LIST_PATH": str(listing)})
    assert proxy_list(settings, {}) == ["http://u:p@b:2", "c:3"]
    assert proxy_list(Settings(), {"PROXIES": "http://d:4, http://e:5\nf:6"}) == [
        "http://d:4", "http://e:5", "f:6",
    ]  # fmt: skip
    assert proxy_list(Settings(), {}) == []
    assert proxy_label("http://user:pw@host:3128") == "host:3128"


def test_ban_policy_statuses_and_markers():
    policy = BanPolicy({403, 429}, [b"captcha"])
    request = Request("http://shop/")

    def page(status=200, body=b"<html>fine</html>"):
        return HtmlResponse("http://shop/", status=status, body=body, request=request)

    assert policy.response_is_ban(request, page(403))
    assert policy.response_is_ban(request, page(429))
    assert policy.response_is_ban(request, page(body=b"<p>Please solve this CAPTCHA</p>"))
    assert policy.response_is_ban(request, page(body=b""))
    assert not policy.response_is_ban(request, page())
    assert not policy.response_is_ban(request, page(404))


def test_proxy_credentials_never_reach_redis():
    spider = Spider("s")
    rotated = Request("http://shop/", meta={"proxy": "http://shop-proxy:3128",
                                            "_rotating_proxy": True, "download_slot": "x"},
                      headers={"Proxy-Authorization": "Basic c2VjcmV0"})  # fmt: skip
    stored = json.loads(dumps_request(rotated, spider))
    assert "Proxy-Authorization" not in stored.get("headers", {})
    assert "proxy" not in stored.get("meta", {})
    own = Request("http://shop/", meta={"proxy": f"http://me:{SECRET}@own-proxy:8080"})
    data = dumps_request(own, spider).decode()
    assert SECRET not in data
    assert json.loads(data)["meta"]["proxy"] == "http://own-proxy:8080"


def test_requests_go_through_the_live_proxy_and_dead_ones_rest(
    redis_url, redis_client, demo_site, live_proxy, nodes, tmp_path
):
    dead = [dead_proxy(), dead_proxy()]
    proxies = [with_credentials(live_proxy), *dead]
    redis_client.lpush("site:start_urls", demo_site.url + "/category/books")
    nodes.start(
        "site", redis_url, spider_args={"allow": ALLOW}, MAX_IDLE_TIME_BEFORE_CLOSE=1,
        ROTATING_PROXY_LIST=",".join(proxies), LOG_LEVEL="DEBUG",
    )  # fmt: skip
    assert nodes.wait(120) == [0], nodes.tail()

    books = {p for p in good_pages() if not p.startswith("/flaky/")}
    stored = {i["url"].removeprefix(demo_site.url) for i in read_items(tmp_path / "items")}
    assert stored == books
    through_proxy = {e["url"].removeprefix(demo_site.url) for e in proxied(live_proxy)}
    assert through_proxy >= books  # every page went through the (authenticated) proxy

    resting = {label.decode() for label in redis_client.hkeys("site:proxies")}
    assert resting == {proxy_label(p) for p in dead}
    log = nodes.log(0)
    assert "'proxies/banned': 2" in log
    # No credentials anywhere a person or another program reads.
    dump = [redis_client.dump(key) or b"" for key in redis_client.keys("*")]
    assert not any(SECRET.encode() in value for value in dump)
    assert SECRET not in log
    for path in (tmp_path / "items").rglob("*.jsonl"):
        assert SECRET not in path.read_text()


def test_a_proxy_found_dead_by_one_node_rests_on_every_node(
    redis_url, redis_client, demo_site, live_proxy, nodes, tmp_path
):
    other = services.start_forward_proxy(auth=f"crawler:{SECRET}")
    try:
        # Another node found the live proxy dead a moment ago, for an hour.
        redis_client.hset("site:proxies", proxy_label(live_proxy.url), f"{time.time() + 3600}:1")
        redis_client.lpush("site:start_urls", demo_site.url + "/category/books")
        nodes.start(
            "site", redis_url, spider_args={"allow": ALLOW}, MAX_IDLE_TIME_BEFORE_CLOSE=1,
            ROTATING_PROXY_LIST=f"{with_credentials(live_proxy)},{with_credentials(other)}",
        )  # fmt: skip
        assert nodes.wait(120) == [0], nodes.tail()
        assert proxied(live_proxy) == []
        assert len(proxied(other)) > 100
    finally:
        other.stop()


def test_ban_pages_rest_proxies_and_a_node_without_proxies_waits_quietly(
    redis_url, redis_client, demo_site, live_proxy, nodes
):
    other = services.start_forward_proxy(auth=f"crawler:{SECRET}")
    try:
        redis_client.lpush("site:start_urls", demo_site.url + "/about")
        nodes.start(
            "site", redis_url, spider_args={"allow": "/about"}, MAX_IDLE_TIME_BEFORE_CLOSE=1,
            ROTATING_PROXY_LIST=f"{with_credentials(live_proxy)},{with_credentials(other)}",
            PROXY_BAN_MARKERS="never changes",  # in the /about page: every answer is a ban
            ROTATING_PROXY_BACKOFF_BASE=1, ROTATING_PROXY_BACKOFF_CAP=2,
            ROTATING_PROXY_PAGE_RETRY_TIMES=4,
        )  # fmt: skip
        assert nodes.wait(120) == [0], nodes.tail()
        attempts = [e for e in proxied(live_proxy) + proxied(other) if e["url"].endswith("/about")]
        assert len(attempts) == 5  # the first try and ROTATING_PROXY_PAGE_RETRY_TIMES: no hammering
        assert {label.decode() for label in redis_client.hkeys("site:proxies")} == {
            proxy_label(live_proxy.url), proxy_label(other.url),
        }  # fmt: skip
        log = nodes.log(0)
        assert log.count("all 2 proxies are resting") == 1
        assert "'proxies/all_resting_waits'" in log
    finally:
        other.stop()


def test_shared_proxy_records_are_validated_both_ways(redis_url, redis_client, caplog):

    from extensions.downloadermiddlewares.proxies import (
        RotatingProxyMiddleware,
        parse_proxy_record,
        proxy_record,
    )

    assert proxy_record(None, 0) is None  # what a 407 once published as "None:0"
    assert proxy_record(float("inf"), 1) is None
    assert proxy_record(1700000000.5, 2) == "1700000000.5:2"
    for bad in (b"None:0", b"garbage", b"1e999:1", b"12:-1", b"\xff:1", b"12"):
        assert parse_proxy_record(bad) is None, bad
    assert parse_proxy_record(b"12.5:3") == (12.5, 3)

    class ProxiedSpider(Spider):
        name = "proxied"

    crawler = crawler_with_addon(
        ProxiedSpider,
        {
            "REDIS_URL": redis_url,
            "ROTATING_PROXY_LIST": ["http://127.0.0.1:1", "http://127.0.0.1:2"],
        },
    )
    middleware = RotatingProxyMiddleware.from_crawler(crawler)
    until = time.time() + 600
    redis_client.hset("proxied:proxies", mapping={"127.0.0.1:1": "None:0",
                                                 "127.0.0.1:2": f"{until}:1"})  # fmt: skip
    with caplog.at_level("WARNING", logger="extensions.downloadermiddlewares.proxies"):
        for _ in range(3):
            middleware._synced = 0.0
            middleware._sync()  # raised ValueError on every sync before
    said = [r for r in caplog.records if "malformed proxy record" in r.getMessage()]
    assert len(said) == 1
    assert crawler.stats.get_value("proxies/bad_records") == 1
    # the good record still rests its proxy on this node
    assert middleware.proxies.proxies["http://127.0.0.1:2"].next_check == until
