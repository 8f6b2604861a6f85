"""User-agent rotation: the pool, companion headers, stickiness per proxy."""

import logging
import random

import fake_useragent.utils
import pytest
from fake_useragent.errors import FakeUserAgentError
from scrapy import Request

from extensions import defaults
from extensions.downloadermiddlewares.useragents import (
    BUILT_IN,
    POOL_SEED,
    ROTATED,
    Identity,
    RotatingUserAgentMiddleware,
    load_pool,
)
from servers import services
from tests.helpers import ALLOW, SECRET, proxied, with_credentials

DEFAULT_HEADERS = {"Accept": "text/html", "Accept-Language": "en"}


def default_pool():
    pool, from_data = load_pool(
        defaults.USER_AGENT_BROWSERS, defaults.USER_AGENT_PLATFORMS, [], 200,
        random.Random(POOL_SEED),
    )  # fmt: skip
    assert from_data
    return pool


def middleware(sticky=False, pool=None):
    return RotatingUserAgentMiddleware(
        pool or default_pool(), sticky=sticky, language="en-US,en;q=0.9",
        default_headers=DEFAULT_HEADERS, default_agent="Scrapy/2.19",
    )  # fmt: skip


def test_the_pool_holds_desktop_browsers_only_and_is_the_same_on_every_node():
    pool = default_pool()
    assert 20 <= len(pool) <= 200
    assert {i.browser for i in pool} <= set(defaults.USER_AGENT_BROWSERS)
    assert not any("Mobile" in i.user_agent or "iPhone" in i.user_agent for i in pool)
    assert pool == default_pool()


def test_chromium_gets_client_hints_and_firefox_does_not():
    chrome = Identity(BUILT_IN[0][0], "Chrome", "Windows").headers("en")
    assert chrome["Sec-CH-UA"].startswith('"Chromium";v="131"')
    assert chrome["Sec-CH-UA-Platform"] == '"Windows"'
    assert "image/avif" in chrome["Accept"]
    firefox = Identity(BUILT_IN[4][0], "Firefox", "Windows").headers("en")
    assert not any(name.startswith("Sec-CH") for name in firefox)


def test_rotation_sets_a_consistent_identity_and_keeps_chosen_ones():
    mw = middleware()
    request = Request("http://shop/", headers={"User-Agent": "Scrapy/2.19", **DEFAULT_HEADERS})
    mw.process_request(request)
    agent = request.headers["User-Agent"].decode()
    assert agent in {i.user_agent for i in mw.pool}
    assert request.headers["Accept-Language"] == b"en-US,en;q=0.9"
    assert bool(request.headers.get("Sec-CH-UA")) == any(
        i.chromium for i in mw.pool if i.user_agent == agent
    )
    own = Request("http://shop/", headers={"User-Agent": "MyBot/1.0"})
    mw.process_request(own)
    assert own.headers["User-Agent"] == b"MyBot/1.0"
    assert not own.meta.get(ROTATED)


def test_sticky_identity_follows_the_proxy_not_its_credentials():
    one, two = middleware(sticky=True), middleware(sticky=True)  # two nodes
    agents = set()
    for node in (one, two):
        for user in ("a", "b"):
            request = Request("http://shop/", meta={"proxy": f"http://{user}:pw@exit-1:3128"})
            node.process_request(request)
            agents.add(request.headers["User-Agent"])
    assert len(agents) == 1
    # A retry through another proxy takes that proxy's identity.
    retry = Request("http://shop/", meta={"proxy": "http://exit-2:3128", ROTATED: True},
                    headers={"User-Agent": agents.pop()})  # fmt: skip
    one.process_request(retry)
    assert retry.headers["User-Agent"] == one.choose(retry).user_agent.encode()


def test_without_fake_useragent_data_a_built_in_list_is_used(monkeypatch, caplog):
    def broken():
        raise FakeUserAgentError("Failed to load or parse browsers.json")

    monkeypatch.setattr(fake_useragent.utils, "load", broken)
    with caplog.at_level(logging.WARNING, logger="extensions.downloadermiddlewares.useragents"):
        pool, from_data = load_pool(["Chrome"], ["desktop"], [], 50, random.Random(1))
    assert not from_data
    assert [i.user_agent for i in pool] == [row[0] for row in BUILT_IN]
    assert len(caplog.records) == 1
    assert "built-in list" in caplog.records[0].getMessage()


@pytest.mark.parametrize("sticky", [True, False])
def test_identities_seen_by_the_proxies(sticky, redis_url, redis_client, demo_site, nodes):
    exits = [services.start_forward_proxy(auth=f"crawler:{SECRET}") for _ in range(2)]
    try:
        redis_client.lpush("site:start_urls", demo_site.url + "/category/books")
        nodes.start(
            "site", redis_url, spider_args={"allow": ALLOW}, MAX_IDLE_TIME_BEFORE_CLOSE=1,
            ROTATING_PROXY_LIST=",".join(with_credentials(p) for p in exits),
            USER_AGENT_STICKY_PER_PROXY=sticky,
        )  # fmt: skip
        assert nodes.wait(120) == [0], nodes.tail()
        seen = [{e["user_agent"] for e in proxied(p)} for p in exits]
        assert all(agents and "Scrapy" not in " ".join(agents) for agents in seen)
        if sticky:
            assert [len(agents) for agents in seen] == [1, 1]
        else:
            assert all(len(agents) > 5 for agents in seen)
    finally:
        for proxy in exits:
            proxy.stop()
