"""Helpers and constants the tests share (fixtures live in conftest.py)."""

from __future__ import annotations

import base64
import json
import os
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from redis.cluster import RedisCluster

from demosite import catalog
from demosite.flaky import FLAKY_KINDS, FLAKY_PER_KIND
from servers import services
from tests.conftest import ROOT, read_items, scrapy, site_hits

SHOP_PAGES = catalog.expected_pages() - {"/about"}
#: a shop of the first categories (``start_demo_site(categories=SMALL_SHOP)``), for a
#: test that needs a whole crawl, not a long one, and no share of it from each node
SMALL_SHOP = 3
SMALL_SHOP_PAGES = catalog.expected_pages(SMALL_SHOP) - {"/about"}


def run_without_waiting(coroutine):
    """The result of a coroutine that finishes without waiting on anything (a
    network call it should not have made, say)."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    raise AssertionError("the coroutine waited")


def stack_settings(values: dict | None = None):
    """Scrapy settings with the stack's defaults installed, as the add-on (or one
    of the project's commands) installs them, under ``values``."""
    from scrapy.settings import Settings

    from extensions.installed import install_defaults

    settings = Settings(values or {})
    install_defaults(settings)
    return settings


def seed(redis_url: str, spider: str, *urls: str) -> None:
    result = scrapy("seed", spider, *urls, "-s", f"REDIS_URL={redis_url}")
    assert result.returncode == 0, result.stderr


def wait_for(check, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    pytest.fail(f"{what}: not within {timeout}s")


def page_hits(site) -> dict[str, int]:
    return {path: n for path, n in site_hits(site).items() if path != "/robots.txt"}


def assert_shop_crawled_once(site, items_dir, categories: int | None = None) -> list[dict]:
    """Every shop page fetched exactly once, one item per product; the items.
    ``categories``: the site is a shop of its first that many."""
    hits = page_hits(site)
    assert set(hits) == catalog.expected_pages(categories) - {"/about"}
    assert {path for path, n in hits.items() if n != 1} == set()
    items = read_items(items_dir)
    products = catalog.total_products(categories)
    assert len({item["url"] for item in items}) == len(items) == products
    return items


ALLOW = "/category/books,/product/,/flaky/"


# the chaos tests run on the project's defaults: the one setting they add is the one
# every batch crawl sets (crawler/settings.py reads it from the environment), so nodes
# close once the whole cluster has had no work for two seconds
CHAOS_SETTINGS = {"MAX_IDLE_TIME_BEFORE_CLOSE": 2}


def good_pages() -> set[str]:
    """What the site spider stores when allowed to follow ALLOW from the two seeds."""
    pages = {"/category/books", "/flaky/"}
    pages |= {f"/category/books?page={n}" for n in range(2, catalog.pages_in("books") + 1)}
    pages |= {f"/product/{i}" for i in catalog.product_ids("books")}
    pages |= {f"/flaky/{kind}/{n}" for kind in FLAKY_KINDS if kind != "500"
              for n in range(1, FLAKY_PER_KIND + 1)}  # fmt: skip
    return pages


HOPELESS = {f"/flaky/500/{n}" for n in range(1, FLAKY_PER_KIND + 1)}


def site_times(site) -> dict[str, list[float]]:
    with urllib.request.urlopen(site.url + "/__times", timeout=10) as response:
        return json.load(response)


FLAKY_SETTINGS = {
    "MAX_IDLE_TIME_BEFORE_CLOSE": 1,
    "DOWNLOAD_TIMEOUT": 2,
    "RETRY_TIMES": 2,
    "RETRY_BACKOFF_BASE": 0.2,
    "RETRY_BACKOFF_MAX": 1,
}


def restart(own_mongo, tmp_path):
    own_mongo["service"] = services.start_mongo_wire(tmp_path / "own-mongo", own_mongo["port"])


PROJECT = Path(__file__).parent / "srproject"  # written for scrapy-redis


def project_scrapy(*args: str, switched: bool, timeout: float = 120):
    """``scrapy`` in the scrapy-redis-style project, before or after its switch."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("SCRAPY_SETTINGS_MODULE", None)
    if switched:
        env["SWITCHED"] = "1"
    return scrapy(*args, timeout=timeout, cwd=PROJECT, env=env)


SECRET = "s3cr3t-pw"


def proxied(proxy) -> list[dict]:
    with urllib.request.urlopen(proxy.url + "/__proxied", timeout=10) as response:
        return json.load(response)


def with_credentials(proxy) -> str:
    return proxy.url.replace("http://", f"http://crawler:{SECRET}@")


def all_keys(client: RedisCluster) -> list[str]:
    return sorted(
        key.decode() for key in client.scan_iter(match="*", target_nodes=RedisCluster.PRIMARIES)
    )


def api(url: str, *, data: dict | None = None, auth: tuple[str, str] | None = None,
        headers: dict | None = None):  # fmt: skip
    """(status, body as JSON or text) of one call, as a script makes it."""
    request = urllib.request.Request(url, method="POST" if data is not None else "GET")
    if data is not None:
        request.data = json.dumps(data).encode()
        request.add_header("Content-Type", "application/json")
    if auth:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    for name, value in (headers or {}).items():
        request.add_header(name, value)
    try:
        with urllib.request.urlopen(request, timeout=20) as response:
            status, body = response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        status, body = exc.code, exc.read().decode()
    try:
        return status, json.loads(body)
    except ValueError:
        return status, body


def read_group(client, key: str = "shop:items") -> list[dict]:
    """Every entry a consumer group reads from the start, acknowledged."""
    client.xgroup_create(key, "readers", id="0", mkstream=True)
    read = []
    for _ in range(1000):  # bounded: a few reads of 100
        answer = client.xreadgroup("readers", "r1", {key: ">"}, count=100)
        if not answer:
            break
        for entry_id, fields in answer[0][1]:
            read.append({k.decode(): v.decode() for k, v in fields.items()})
            client.xack(key, "readers", entry_id)
    return read
