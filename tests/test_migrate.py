"""Carrying a scrapy-redis crawl in progress over: state left by scrapy-redis
itself, detected, converted by ``scrapy migrate``, and crawled on."""

from __future__ import annotations

import base64
import collections
import datetime as dt
import decimal
import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from scrapy import Request
from scrapy.http import HtmlResponse
from scrapy.linkextractors import LinkExtractor

from demosite import catalog
from extensions.compat import ScrapyRedisFingerprinter
from extensions.frontier.serializer import loads_request
from extensions.keys import SpiderKeys
from extensions.migrate import Migration, lifo_queue_class, spider_stub
from extensions.plainpickle import unpickle
from tests.conftest import ROOT, queued, scrapy, site_hits
from tests.helpers import PROJECT, project_scrapy
from tests.spiders import ScrapyRedisStyleSpider


def paths(hits: dict[str, int]) -> set[str]:
    return {path for path in hits if path.startswith(("/category/books", "/product/"))}


def test_a_scrapy_redis_crawl_in_progress_is_carried_over(
    redis_url, redis_client, demo_site, tmp_path
):
    redis_client.lpush("books:start_urls", demo_site.url + "/category/books")
    before = project_scrapy(
        "crawl", "books", "-s", f"REDIS_URL={redis_url}", "-s", "CLOSESPIDER_PAGECOUNT=25",
        "-s", "CONCURRENT_REQUESTS=2", switched=False,
    )  # fmt: skip
    assert before.returncode == 0, before.stderr[-3000:]
    crawled_before = paths(site_hits(demo_site))
    assert redis_client.type("books:requests") == b"zset"
    assert redis_client.type("books:dupefilter") == b"set"
    # what scrapy-redis had left to do (the test trusts this Redis: it wrote it)
    pending = {
        pickle.loads(raw)["url"].removeprefix(demo_site.url)
        for raw in redis_client.zrange("books:requests", 0, -1)
    }
    seen_before = redis_client.scard("books:dupefilter")
    assert pending and not pending & crawled_before

    settings = ("-s", f"REDIS_URL={redis_url}", "-s", "MAX_IDLE_TIME_BEFORE_CLOSE=2",
                "-s", f"ITEMS_DIR={tmp_path / 'items'}")  # fmt: skip
    refused = project_scrapy("crawl", "books", *settings, switched=True)
    assert refused.returncode == 1
    assert "run `scrapy migrate books`" in refused.stderr
    assert "Traceback" not in refused.stderr

    dry = project_scrapy("migrate", "books", "--dry-run", *settings, switched=True)
    assert dry.returncode == 0, dry.stderr
    assert f"would convert {len(pending)} pickled requests" in dry.stdout
    assert redis_client.type("books:dupefilter") == b"set"  # a dry run changes nothing

    migrated = project_scrapy("migrate", "books", *settings, switched=True)
    assert migrated.returncode == 0, migrated.stdout + migrated.stderr
    assert "pickle" in migrated.stderr  # the warning
    assert f"converted {len(pending)} requests" in migrated.stdout
    assert f"kept {seen_before} fingerprints" in migrated.stdout
    assert redis_client.get("books:fingerprinter") == b"scrapy-redis"
    assert int(redis_client.hget("books:dupefilter", "n")) == seen_before
    assert not redis_client.keys("books:migrating:*")
    converted = [json.loads(raw) for raw in queued(redis_client, "books")]
    assert {r["url"].removeprefix(demo_site.url) for r in converted} == pending

    after = project_scrapy("crawl", "books", *settings, switched=True, timeout=240)
    assert after.returncode == 0, after.stderr[-3000:]
    assert "is left over from before the add-on" in after.stderr  # the half-done switch said
    hits = site_hits(demo_site)
    crawled_after = paths(hits) - crawled_before
    assert pending <= crawled_after  # nothing of the old queue lost
    twice = {path for path in paths(hits) if hits[path] > 1}
    # nothing the old crawl fetched is fetched again, but for the start URL: its
    # request was dont_filter, so scrapy-redis never recorded it as seen and a
    # link to it is new (scrapy-redis alone would fetch it again too)
    assert twice <= {"/category/books"}
    expected = (
        {f"/product/{i}" for i in catalog.product_ids("books")}
        | {"/category/books"}
        | {f"/category/books?page={n}" for n in range(2, catalog.pages_in("books") + 1)}
    )
    # scrapy-redis itself drops what was in flight when it stopped (at most its concurrency)
    assert len(expected - crawled_before - crawled_after) <= 2
    items = [
        json.loads(line)
        for path in (tmp_path / "items").rglob("*.jsonl")
        for line in path.read_text().splitlines()
    ]
    stored = {item["link"].removeprefix(demo_site.url) for item in items}
    assert stored == {p for p in crawled_after if p.startswith("/product/")}


def test_the_fingerprint_is_scrapy_redis_own():
    from scrapy_redis.dupefilter import RFPDupeFilter

    for request in (
        Request("http://example.com/a?b=2&a=1"),
        Request("http://example.com/form", method="POST", body=b"x=1"),
    ):
        theirs = RFPDupeFilter(server=None, key="k").request_fingerprint(request)
        assert ScrapyRedisFingerprinter().fingerprint(request).hex() == theirs


class Boom:
    def __reduce__(self):
        return (os.system, ("touch /tmp/should-never-exist",))


def test_bad_queue_entries_are_dead_lettered_and_no_pickled_class_is_loaded(redis_client):
    marker = Path("/tmp/should-never-exist")
    marker.unlink(missing_ok=True)
    keys = SpiderKeys.for_spider("fromdata")
    good = {"url": "http://a/1", "callback": "parse", "priority": 3, "meta": {"depth": 1},
            "headers": {b"Accept": [b"text/html"]}, "body": b"", "method": "GET"}  # fmt: skip
    wrong_callback = {"url": "http://a/2", "callback": "__init__"}
    redis_client.rpush(
        "fromdata:requests",
        pickle.dumps(good),
        pickle.dumps(Boom()),
        b"\x80\x05garbage",
        pickle.dumps(wrong_callback),
    )
    redis_client.sadd("fromdata:dupefilter", "ab" * 20, "not hex")
    spider = spider_stub(ScrapyRedisStyleSpider)
    report = Migration(redis_client, keys, spider, batch=2).run(progress=lambda line: None)
    assert not marker.exists()
    assert (report.requests, report.dead_lettered, report.fingerprints) == (1, 3, 1)
    [(request_id, score)] = redis_client.zrange("fromdata:queue:a", 0, -1, withscores=True)
    assert score < 0  # priority 3 ahead of priority 0
    data = redis_client.hget("fromdata:data:a", request_id)
    assert json.loads(data)["headers"] == {"Accept": ["text/html"]}
    letters = [json.loads(raw) for raw in redis_client.lrange("fromdata:dlq", 0, -1)]
    assert {letter["kind"] for letter in letters} == {"unreadable"}
    reasons = " | ".join(letter["error"] for letter in letters)
    assert "refused to load" in reasons and "__init__" in reasons
    raws = {base64.b64decode(letter["raw64"]) for letter in letters}
    assert b"\x80\x05garbage" in raws  # the entry is kept as it was
    # the queued request's fingerprint and the old dupefilter's one: 2
    assert int(redis_client.hget("fromdata:dupefilter", "n")) == 2
    assert not redis_client.keys("fromdata:migrating:*")


def test_an_interrupted_migration_is_finished_by_running_it_again(redis_client):
    keys = SpiderKeys.for_spider("fromdata")
    requests = [pickle.dumps({"url": f"http://a/{n}", "callback": "parse"}) for n in range(5)]
    # as if a first run had moved both keys and died before converting
    redis_client.zadd(keys.migrating("requests"), dict.fromkeys(requests, 0))
    redis_client.sadd(keys.migrating("dupefilter"), "cd" * 20)
    migration = Migration(redis_client, keys, spider_stub(ScrapyRedisStyleSpider), batch=2)
    assert migration.plan() == [
        f"finish the interrupted conversion of {keys.migrating('requests')}",
        f"finish the interrupted conversion of {keys.migrating('dupefilter')}",
    ]
    report = migration.run(progress=lambda line: None)
    assert (report.requests, report.fingerprints) == (5, 1)
    assert len(queued(redis_client, "fromdata")) == 5
    assert redis_client.get(keys.fingerprinter) == b"scrapy-redis"
    assert not redis_client.keys("fromdata:migrating:*")
    assert unpickle(pickle.dumps({"a": [1, b"x"]})) == {"a": [1, b"x"]}


def test_crawl_spider_requests_and_the_inert_values_of_meta_are_converted(redis_client):
    """What CrawlSpider rules queue (the link's text is lxml's str subclass) and
    the values requests carry in practice come through as they were; a class
    that is not one of them is refused and never imported."""
    from scrapy_redis import picklecompat

    page = HtmlResponse("http://a/", body=b"<a href='/next'>Next <b>page</b></a>")
    [link] = LinkExtractor().extract_links(page)
    meta = {
        "rule": 0,
        "link_text": link.text,
        "when": dt.datetime(2026, 12, 1, 9, 30, tzinfo=dt.timezone(dt.timedelta(hours=2))),
        "day": dt.date(2026, 11, 30),
        "took": dt.timedelta(seconds=90),
        "price": decimal.Decimal("9.99"),
        "pair": (1, ("a", "b")),
        "ids": {3, 4},
        "ordered": collections.OrderedDict([("z", 1), ("a", 2)]),
    }
    crawl = Request(link.url, meta=meta, cb_kwargs={"seen": frozenset({"x"})}, priority=2)
    entries = [picklecompat.dumps(crawl.to_dict())]
    # an older writer's protocol: sets and frozensets as classes of builtins
    entries.append(pickle.dumps({"url": "http://a/old", "meta": {"ids": {5}}}, protocol=2))
    refused = {
        "http://a/dict": {"url": "http://a/dict", "meta": {"d": collections.defaultdict(list)}},
        "http://a/class": {"url": "http://a/class", "_class": "antigravity.Request"},
        "http://a/object": {"url": "http://a/object", "meta": {"c": complex(1, 2)}},
    }
    entries += [pickle.dumps(obj) for obj in refused.values()]
    redis_client.rpush("fromdata:requests", *entries)
    spider = spider_stub(ScrapyRedisStyleSpider)
    report = Migration(redis_client, SpiderKeys.for_spider("fromdata"), spider).run(
        progress=lambda line: None
    )
    assert (report.requests, report.dead_lettered) == (2, 3)
    assert "antigravity" not in sys.modules
    converted = {}
    for raw in queued(redis_client, "fromdata"):
        request = loads_request(raw, spider)
        converted[request.url] = request
    back = converted["http://a/next"]
    assert back.meta == meta and back.priority == 2
    assert type(back.meta["link_text"]) is str and back.meta["link_text"] == "Next page"
    assert {k: type(v) for k, v in back.meta.items()} == {
        **{k: type(v) for k, v in meta.items()},
        "link_text": str,
    }
    assert back.cb_kwargs == {"seen": frozenset({"x"})}
    assert converted["http://a/old"].meta == {"ids": {5}}
    letters = {
        letter["url"]: letter["error"]
        for letter in map(json.loads, redis_client.lrange("fromdata:dlq", 0, -1))
    }
    assert set(letters) == set(refused)
    assert "refused to load collections.defaultdict" in letters["http://a/dict"]
    assert "unknown request class 'antigravity.Request'" in letters["http://a/class"]
    assert "refused to load builtins.complex" in letters["http://a/object"]


@pytest.mark.parametrize("queue_class", ["FifoQueue", "LifoQueue", "PriorityQueue"])
def test_a_queue_is_converted_in_the_order_scrapy_redis_would_pop_it(redis_client, queue_class):
    from scrapy_redis import picklecompat, queue

    spider = spider_stub(ScrapyRedisStyleSpider)
    stock = getattr(queue, queue_class)(redis_client, spider, "fromdata:requests", picklecompat)
    for n in range(11):  # one host: one queue of this crawler's
        priority = n % 3 if queue_class == "PriorityQueue" else 0
        stock.push(Request(f"http://a/{n}", priority=priority))
    redis_client.copy("fromdata:requests", "copy:requests")
    popper = getattr(queue, queue_class)(redis_client, spider, "copy:requests", picklecompat)
    popped = [popper.pop().url for _ in range(11)]
    assert len(set(popped)) == 11
    lifo = lifo_queue_class(f"scrapy_redis.queue.{queue_class}")
    assert lifo == (queue_class == "LifoQueue")
    migration = Migration(
        redis_client, SpiderKeys.for_spider("fromdata"), spider, batch=4, lifo=lifo
    )
    report = migration.run(progress=lambda line: None)
    assert report.requests == 11
    assert [json.loads(raw)["url"] for raw in queued(redis_client, "fromdata")] == popped


def _no_caches(part: str) -> dict:
    if (ROOT / part).is_dir():
        return {"ignore": shutil.ignore_patterns("__pycache__")}
    return {}


def test_another_project_uses_the_stack_from_an_installed_checkout(
    redis_url, redis_client, demo_site, tmp_path
):
    """The README's route for another project: the checkout installed into its
    environment (here into a directory of its own, not the checkout on the path)."""
    # a copy, so the build leaves nothing in the checkout
    source = tmp_path / "checkout"
    source.mkdir()
    for part in ("setup.py", "pyproject.toml", "crawler", "extensions"):
        copy = shutil.copytree if (ROOT / part).is_dir() else shutil.copy
        copy(ROOT / part, source / part, **_no_caches(part))
    target = tmp_path / "site-packages"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--no-index", "--target", str(target), str(source)],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert install.returncode == 0, install.stderr
    assert (target / "extensions" / "frontier" / "scripts" / "enqueue.lua").exists()
    env = {**os.environ, "PYTHONPATH": str(target), "SWITCHED": "1"}
    env.pop("SCRAPY_SETTINGS_MODULE", None)
    seeded = scrapy("seed", "books", demo_site.url + "/about", "-s", f"REDIS_URL={redis_url}",
                    cwd=PROJECT, env=env)  # fmt: skip
    assert seeded.returncode == 0, seeded.stderr
    assert redis_client.lrange("books:start_urls", 0, -1) == [(demo_site.url + "/about").encode()]
    located = subprocess.run(
        [sys.executable, "-c", "import extensions, sys; print(extensions.__file__)"],
        cwd=PROJECT, capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert located.stdout.startswith(str(target))
