"""scrapy-redis's own example project (tests/scrapy_redis_example, its source as
it is, pointed at the demo site's /directory/): each of its three spiders
crawls part way with stock scrapy-redis, then the project is switched over as
the README says, ``scrapy migrate`` carries the crawl over, and the crawl
finishes; its RedisPipeline items keep flowing to NAME:items for
process_items.py."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

from scrapy import Request

from demosite import directory
from extensions.compat import ScrapyRedisFingerprinter
from tests.conftest import ROOT, scrapy, site_hits

EXAMPLE = Path(__file__).parent / "scrapy_redis_example"
STOCK_PAGES = 20  # CLOSESPIDER_PAGECOUNT of the stock run: part way
SWITCH = (  # the README's one step, added to the project's settings.py
    '\nADDONS = {"extensions.addon.DistributedAddon": 0}\n'
    'COMMANDS_MODULE = "extensions.commands"  # scrapy seed / status / dlq\n'
)


class Project:
    """A copy of the example project, run with the crawler's checkout importable."""

    def __init__(self, tmp_path: Path, site_url: str, redis_url: str):
        self.path = tmp_path / "example-project"
        shutil.copytree(EXAMPLE, self.path, ignore=shutil.ignore_patterns("__pycache__"))
        dmoz = self.path / "example" / "spiders" / "dmoz.py"
        dmoz.write_text(dmoz.read_text().replace("http://127.0.0.1:8000", site_url))
        self.redis_url = redis_url
        self.items_dir = tmp_path / "items"

    def scrapy(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        env.pop("SCRAPY_SETTINGS_MODULE", None)
        common = ("-s", f"REDIS_URL={self.redis_url}", "-s", "DOWNLOAD_DELAY=0",
                  "-s", f"ITEMS_DIR={self.items_dir}")  # fmt: skip
        return scrapy(*args, *common, timeout=timeout, cwd=self.path, env=env)

    def crawl_stock(self, name: str, *args: str) -> None:
        done = self.scrapy("crawl", name, *args, "-s", f"CLOSESPIDER_PAGECOUNT={STOCK_PAGES}",
                           "-s", "CONCURRENT_REQUESTS=2")  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        assert "closespider_pagecount" in done.stderr  # stopped part way

    def switch(self) -> None:
        settings = self.path / "example" / "settings.py"
        settings.write_text(settings.read_text() + SWITCH)

    def migrate(self, name: str) -> str:
        done = self.scrapy("migrate", name)
        assert done.returncode == 0, done.stdout + done.stderr[-3000:]
        return done.stdout

    def crawl_switched(self, name: str, *args: str) -> None:
        done = self.scrapy("crawl", name, *args, "-s", "MAX_IDLE_TIME_BEFORE_CLOSE=2",
                           timeout=240)  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        assert "Traceback" not in done.stderr, done.stderr[-3000:]

    def process_items(self, key: str, count: int) -> list[str]:
        """process_items.py as the example's README runs it: the items it processed."""
        host, port = self.redis_url.removeprefix("redis://").split("/")[0].split(":")
        done = subprocess.run(
            [sys.executable, "process_items.py", key, "--host", host, "--port", port,
             "--limit", str(count), "--timeout", "1", "-v"],
            cwd=self.path, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        return [line for line in done.stderr.splitlines() if "Processing item" in line]


def directory_hits(site) -> dict[str, int]:
    return {path: n for path, n in site_hits(site).items() if path.startswith(directory.ROOT)}


def stock_state(redis_client, site_url: str, name: str) -> tuple[set[str], set[str]]:
    """What stock scrapy-redis left queued, and the pages it recorded as seen."""
    # the test trusts this Redis: stock scrapy-redis wrote it
    pending = {
        pickle.loads(raw)["url"].removeprefix(site_url)
        for raw in redis_client.zrange(f"{name}:requests", 0, -1)
    }
    seen = {raw.decode() for raw in redis_client.smembers(f"{name}:dupefilter")}
    fingerprint = ScrapyRedisFingerprinter().fingerprint
    recorded = {
        path
        for path in directory.category_paths()
        if fingerprint(Request(site_url + path)).hex() in seen
    }
    return pending, recorded


def items_of(redis_client, name: str) -> list[dict]:
    return [json.loads(raw) for raw in redis_client.lrange(f"{name}:items", 0, -1)]


def test_dmoz_a_crawl_spider_switches_over_mid_crawl(redis_url, redis_client, demo_site, tmp_path):
    project = Project(tmp_path, demo_site.url, redis_url)
    project.crawl_stock("dmoz")
    before = set(directory_hits(demo_site))
    pending, recorded = stock_state(redis_client, demo_site.url, "dmoz")
    assert pending and not pending & before
    # what stock had in hand when it stopped: seen, neither fetched nor queued
    lost = recorded - before - pending

    project.switch()
    migrated = project.migrate("dmoz")
    assert f"converted {len(pending)} requests" in migrated
    assert "could not be converted" not in migrated
    assert not redis_client.exists("dmoz:dlq")
    project.crawl_switched("dmoz")

    hits = directory_hits(demo_site)
    assert set(hits) - before >= pending  # the queue carried on
    twice = {path for path, n in hits.items() if n > 1}
    assert twice <= {directory.ROOT}  # its start URL, dont_filter in CrawlSpider
    assert set(directory.category_paths()) - set(hits) == lost  # every other page
    # the RedisPipeline's items, one per listing of every category page, no page twice
    items = items_of(redis_client, "dmoz")
    assert len(items) == 3 * len(set(hits) - {directory.ROOT})
    assert len({item["link"] for item in items}) == len(items)
    assert all(item["spider"] == "dmoz" and item["crawled"] for item in items)
    processed = project.process_items("dmoz:items", len(items))
    assert len(processed) == len(items)
    assert redis_client.llen("dmoz:items") == 0  # all taken by process_items.py


def test_myspider_redis_start_urls_and_queue_carry_over(
    redis_url, redis_client, demo_site, tmp_path
):
    pages = directory.category_paths()
    redis_client.rpush("myspider:start_urls", *(demo_site.url + path for path in pages))
    project = Project(tmp_path, demo_site.url, redis_url)
    project.crawl_stock("myspider_redis", "-a", "domain=127.0.0.1")
    left = redis_client.llen("myspider:start_urls")
    assert 0 < left < len(pages)

    project.switch()
    project.migrate("myspider_redis")
    assert not redis_client.exists("myspider_redis:dlq")
    project.crawl_switched("myspider_redis", "-a", "domain=127.0.0.1")

    hits = directory_hits(demo_site)
    assert hits == dict.fromkeys(pages, 1)  # every page once: none lost, none again
    items = items_of(redis_client, "myspider_redis")
    assert sorted(item["url"].removeprefix(demo_site.url) for item in items) == sorted(pages)
    assert len(project.process_items("myspider_redis:items", len(items))) == len(items)


def test_mycrawler_redis_follows_every_link_once_switched(
    redis_url, redis_client, demo_site, tmp_path
):
    """Its ``allowed_domains`` is a ``filter`` object, which Scrapy's offsite check
    reads empty the second time: under stock every link it follows is dropped as
    offsite. Switched, the same spider crawls the directory."""
    starts = [
        directory.ROOT + p for p in ("", "Arts/", "Science/", "Arts/Music/", "Science/Physics/")
    ]
    redis_client.rpush("mycrawler:start_urls", *(demo_site.url + path for path in starts))
    project = Project(tmp_path, demo_site.url, redis_url)
    done = project.scrapy("crawl", "mycrawler_redis", "-a", "domain=127.0.0.1",
                          "-s", "CLOSESPIDER_PAGECOUNT=2",
                          "-s", "CONCURRENT_REQUESTS=2")  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    fetched_by_stock = set(directory_hits(demo_site))
    assert fetched_by_stock < set(starts)  # part way

    project.switch()
    project.migrate("mycrawler_redis")
    project.crawl_switched("mycrawler_redis", "-a", "domain=127.0.0.1")

    hits = directory_hits(demo_site)
    assert set(hits) == set(directory.category_paths())
    # only start URLs come twice: scrapy-redis's spider makes them dont_filter
    assert {path for path, n in hits.items() if n > 1} <= set(starts)
    items = items_of(redis_client, "mycrawler_redis")
    # one item per page its rule reached (the root too: every breadcrumb links to it)
    followed = [item["url"].removeprefix(demo_site.url) for item in items]
    assert sorted(followed) == sorted(directory.category_paths())
    assert len(project.process_items("mycrawler_redis:items", len(items))) == len(items)
