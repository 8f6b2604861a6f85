"""A project of one's own, as a Scrapy user starts it: ``scrapy startproject``
(Scrapy's template as it is: DOWNLOAD_DELAY = 1, CONCURRENT_REQUESTS_PER_DOMAIN = 1),
the lines the README's "Make your own spider distributed" gives for settings.py,
and a DistributedSpider; every command run in that project, with the crawler's
checkout importable as an installed package would be."""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from servers import services
from tests.conftest import ROOT, read_items, scrapy, site_hits
from tests.helpers import read_group, site_times, wait_for
from tests.test_webhooks import SECRET, Receiver

SPIDER = """
from extensions.spiders import DistributedSpider


class ShopSpider(DistributedSpider):
    name = "shop"
    allowed_domains = ["127.0.0.1"]

    def parse(self, response):
        yield {"url": response.url, "title": response.css("title::text").get()}
        yield from self.follow_links(response)
"""
#: the environment a user's shell would not have: the suite's own settings module
LEFT_OUT = ("SCRAPY_SETTINGS_MODULE", "REDIS_URL", "MONGO_URI", "ITEMS_DIR")
WARNING = re.compile(r"\] (WARNING|ERROR|CRITICAL):|Warning:|Traceback")


def readme_settings() -> str:
    """The Python block the README gives for a project's settings.py."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Make your own spider distributed", 1)[1]
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block and "ADDONS" in block.group(1)
    return block.group(1)


class Project:
    def __init__(self, path: Path, redis_url: str):
        self.path = path
        self.redis_url = redis_url
        self.logs: list[Path] = []
        self.procs: list[subprocess.Popen] = []

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in LEFT_OUT}
        return {**env, "PYTHONPATH": str(ROOT), "REDIS_URL": self.redis_url, **extra}

    def scrapy(self, *args: str, timeout: float = 120, **env: str):
        return scrapy(*args, cwd=self.path, env=self.env(**env), timeout=timeout)

    def start_node(self, *settings: str) -> subprocess.Popen:
        log = self.path / f"node-{len(self.procs) + 1}.log"
        args = [sys.executable, "-m", "scrapy", "crawl", "shop"]
        for setting in settings:
            args += ["-s", setting]
        with log.open("wb") as stderr:
            proc = subprocess.Popen(args, cwd=self.path, env=self.env(), stdout=subprocess.DEVNULL,
                                    stderr=stderr, start_new_session=True)  # fmt: skip
        self.procs.append(proc)
        self.logs.append(log)
        return proc

    def stop_nodes(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)  # Ctrl-C's way: a clean close
        for proc in self.procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                services.stop(proc, timeout=5, sig=signal.SIGKILL)

    def log(self, index: int) -> str:
        return self.logs[index].read_text(errors="replace")


@pytest.fixture
def project(tmp_path, redis_url):
    env = {k: v for k, v in os.environ.items() if k not in LEFT_OUT}
    made = subprocess.run([sys.executable, "-m", "scrapy", "startproject", "mine"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, env=env)  # fmt: skip
    assert made.returncode == 0, made.stderr
    path = tmp_path / "mine"
    settings = path / "mine" / "settings.py"
    template = settings.read_text()
    assert "DOWNLOAD_DELAY = 1" in template and "CONCURRENT_REQUESTS_PER_DOMAIN = 1" in template
    settings.write_text(template + "\n" + readme_settings())
    (path / "mine" / "spiders" / "shop.py").write_text(SPIDER)
    own = Project(path, redis_url)
    yield own
    own.stop_nodes()


def test_redis_url_from_the_environment_reaches_every_command_and_a_dead_one_is_one_line(
    project, redis_client, demo_site
):
    seeded = project.scrapy("seed", "shop", demo_site.url + "/about")
    assert seeded.returncode == 0, seeded.stderr
    assert f"Redis {project.redis_url}" in seeded.stderr  # the Redis it used, named
    assert redis_client.llen("shop:start_urls") == 1
    status = project.scrapy("status", "shop")
    assert status.returncode == 0 and f"Redis {project.redis_url}" in status.stderr
    node = project.start_node("CLOSESPIDER_PAGECOUNT=1")
    assert node.wait(90) == 0, project.log(0)[-3000:]
    assert site_hits(demo_site).get("/about") == 1  # the node took the entry there
    assert f"reading start URLs from Redis list shop:start_urls at {project.redis_url}" in (
        project.log(0)
    )
    assert redis_client.llen("shop:start_urls") == 0

    dead = f"redis://127.0.0.1:{services.free_port()}/0"
    for args in (("seed", "shop", demo_site.url + "/"), ("status", "shop"), ("dlq", "shop", "list"),
                 ("crawl", "shop")):  # fmt: skip
        failed = project.scrapy(*args, REDIS_URL=dead)
        assert failed.returncode != 0, args
        said = [line for line in failed.stderr.splitlines() if "cannot reach Redis" in line]
        assert len(said) == 1 and dead in said[0], (args, failed.stderr[-2000:])
        assert "Traceback" not in failed.stderr, (args, failed.stderr[-3000:])
    # -s wins over the environment, and settings.py over the environment too
    assert project.scrapy("status", "shop", "-s", f"REDIS_URL={dead}").returncode != 0
    settings = project.path / "mine" / "settings.py"
    settings.write_text(settings.read_text() + f'\nREDIS_URL = "{dead}"\n')
    written = project.scrapy("status", "shop")
    assert written.returncode != 0 and dead in written.stderr
    assert project.scrapy("status", "shop", "-s", f"REDIS_URL={project.redis_url}").returncode == 0


@pytest.mark.paced
def test_two_nodes_keep_the_templates_delay_for_the_cluster_quietly_and_a_new_crawl_starts_at_once(
    project, demo_site
):
    seeded = project.scrapy("seed", "shop", demo_site.url + "/", "--crawl", "first")
    assert seeded.returncode == 0, seeded.stderr
    project.start_node()
    project.start_node()
    wait_for(lambda: len(site_hits(demo_site)) >= 8, 60, "the first crawl under way")
    asked = time.time()
    second = project.scrapy("seed", "shop", demo_site.url + "/about", "--crawl", "second")
    assert second.returncode == 0, second.stderr
    # the second crawl's page comes within seconds, not when the first is done
    wait_for(lambda: "/about" in site_hits(demo_site), 30, "the second crawl's first page")
    wait_for(lambda: sum(site_hits(demo_site).values()) >= 24, 60, "more of the crawl")
    project.stop_nodes()

    assert site_times(demo_site)["/about"][0] - asked < 12
    stamps = sorted(t for times in site_times(demo_site).values() for t in times)
    gaps = [b - a for a, b in itertools.pairwise(stamps)]
    rate = (len(stamps) - 1) / (stamps[-1] - stamps[0])
    # one request a second at the site from both nodes together: not two (a delay
    # per node), not a fraction (a node waiting out the delay on top of the pace).
    # Below 5/s slots are a tenth of a second apart on top of the interval: 0.85/s
    assert 0.7 <= rate <= 1.15, (rate, gaps)
    assert min(gaps) >= 0.5, gaps
    for index in range(2):
        log = project.log(index)
        assert log.count("DOWNLOAD_DELAY = 1.0 s holds for the whole cluster") == 1  # said once
        assert "Crawled" in log and "'downloader/response_count'" in log
        noisy = [line for line in log.splitlines() if WARNING.search(line)]
        assert noisy == [], noisy[:10]


def test_seen_urls_are_named_again_fetches_them_a_page_is_stored_once_and_reparse_waits_for_nothing(
    project, redis_client, small_shop
):
    about = [small_shop.url + f"/about?v={n}" for n in range(3)]  # one page, three URLs
    seeded = project.scrapy("seed", "shop", small_shop.url + "/", *about)
    assert seeded.returncode == 0 and "run before" not in seeded.stderr, seeded.stderr
    warc = project.path / "warc"
    # the crawl itself at full speed (what is measured here is what comes after)
    node = project.start_node("DOWNLOAD_DELAY=0", "CONCURRENT_REQUESTS_PER_DOMAIN=16",
                              "MAX_IDLE_TIME_BEFORE_CLOSE=2", "WARC_ENABLED=True",
                              f"WARC_DIR={warc}")  # fmt: skip
    assert node.wait(180) == 0, project.log(0)[-3000:]
    items = read_items(project.path / "data" / "shop")
    assert len(items) > 300
    # with the defaults, a page under URLs no rule knows is stored once unmarked
    copies = [item for item in items if "/about" in item["url"]]
    assert len(copies) >= 3  # the three seeded, and the shop's own link to /about
    assert len([item for item in copies if "duplicate_of" not in item]) == 1, copies

    again = project.scrapy("seed", "shop", small_shop.url + "/")
    assert again.returncode == 0
    assert "has run before" in again.stderr and "--again" in again.stderr, again.stderr
    redis_client.delete("shop:start_urls")  # (the entry a node would skip as seen)
    forced = project.scrapy("seed", "shop", small_shop.url + "/", "--again")
    assert forced.returncode == 0 and "run before" not in forced.stderr
    [entry] = redis_client.lrange("shop:start_urls", 0, -1)
    assert json.loads(entry) == {"url": small_shop.url + "/", "dont_filter": True}
    before = site_hits(small_shop).get("/", 0)
    node = project.start_node("MAX_IDLE_TIME_BEFORE_CLOSE=2")
    assert node.wait(90) == 0, project.log(1)[-3000:]
    assert site_hits(small_shop)["/"] == before + 1  # fetched again; what it links to is not

    hits = sum(site_hits(small_shop).values())
    # the project's own settings (DOWNLOAD_DELAY = 1): a reparse sends nothing, so
    # waits for nothing (at 1 s a page it would take minutes)
    reparsed = project.scrapy("reparse", "shop", "-s", f"WARC_DIR={warc}",
                              "-s", f"ITEMS_DIR={project.path / 'again'}", timeout=120)  # fmt: skip
    assert reparsed.returncode == 0, reparsed.stderr[-3000:]
    assert sum(site_hits(small_shop).values()) == hits
    assert len(read_items(project.path / "again")) >= len(items)


def test_a_crawls_budget_caps_it_for_the_whole_cluster_told_and_streamed(
    project, demo_site, redis_client
):
    receiver = Receiver()
    # the project's own settings.py: its items to a stream and Parquet files too, its
    # events and pages to a webhook
    settings = project.path / "mine" / "settings.py"
    lines = ['ITEM_STORES = ["jsonl", "stream", "parquet"]', f"WEBHOOK_URLS = [{receiver.url!r}]",
             f"WEBHOOK_SECRET = {SECRET!r}", "WEBHOOK_PAGE_EVENTS = True"]  # fmt: skip
    settings.write_text(settings.read_text() + "\n" + "\n".join(lines) + "\n")
    seeded = project.scrapy("seed", "shop", demo_site.url + "/", "--crawl", "capped",
                            "--budget", "30")  # fmt: skip
    assert seeded.returncode == 0, seeded.stderr
    try:
        for _ in range(2):
            project.start_node("DOWNLOAD_DELAY=0", "MAX_IDLE_TIME_BEFORE_CLOSE=2")
        for index, node in enumerate(project.procs):
            assert node.wait(120) == 0, project.log(index)[-3000:]
    finally:
        receiver.stop()
    assert sorted(receiver.told()) == [
        ("crawl.completed", "capped"), ("crawl.pages", "capped"), ("crawl.started", "capped")
    ]  # fmt: skip
    streamed = [json.loads(entry["item"])["url"] for entry in read_group(redis_client)]
    stored = [item["url"] for item in read_items(project.path / "data" / "shop")]
    assert sorted(streamed) == sorted(stored) and len(set(stored)) == len(stored) > 20
    files = project.path / "data" / "shop" / "*.parquet"
    rows = duckdb.connect().execute(f"select url from read_parquet('{files}')").fetchall()
    assert sorted(url for (url,) in rows) == sorted(stored)
    pages = {path: n for path, n in site_hits(demo_site).items() if path != "/robots.txt"}
    # two nodes, one cap (the shop has 2,136 pages): 30 requests queued for the
    # crawl, of which robots.txt forbids the shop's /private/ link
    assert 28 <= sum(pages.values()) <= 30 and set(pages.values()) == {1}, pages
    # every page fetched told once in crawl.pages events
    told = [page["url"].removeprefix(demo_site.url) for event in receiver.verified
            if event["type"] == "crawl.pages" for page in event["data"]["pages"]]  # fmt: skip
    assert len(told) == len(set(told)) and set(told) >= set(pages), (told, pages)
    figures = json.loads(project.scrapy("status", "shop", "--crawl", "capped", "--json").stdout)
    assert figures["dropped"] > 0 and figures["done"] <= 30, figures
