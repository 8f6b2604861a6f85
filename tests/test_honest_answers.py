"""What a project's own settings mean, and what the commands and the console say
when there is little to say: the environment's connections, the template's
DOWNLOAD_DELAY for the cluster, components that are off said at INFO, empty
answers with their reason, a closed pipe, the console's finished crawls."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time

import pytest
from scrapy import Spider
from scrapy.exceptions import NotConfigured
from scrapy.settings import Settings

from extensions import environment
from extensions.addon import DistributedAddon
from extensions.cluster.checkpoint import Checkpoint
from extensions.console.app import Console
from extensions.console.auth import LOCAL
from extensions.crawlid import ITEMS_WITHOUT_ID
from extensions.downloader import GatedDownloader
from extensions.downloadermiddlewares.politeness import ClusterPolitenessMiddleware
from extensions.frontier.crawls.state import CrawlFigures, Crawls
from extensions.frontier.frontier import Frontier
from extensions.keys import SpiderKeys
from extensions.warc.middleware import WarcMiddleware
from servers import services
from tests.conftest import ROOT, crawler_with_addon, scrapy
from tests.helpers import wait_for


def applied(values: dict, priority: str = "project") -> Settings:
    settings = Settings()
    settings.setdict(values, priority=priority)
    DistributedAddon().update_settings(settings)
    return settings


@pytest.mark.unit
def test_the_environment_counts_where_the_project_is_silent_and_settings_py_or_s_win():
    environ = {"REDIS_URL": "redis://from-env:6379/0", "MONGO_URI": "mongodb://env/"}
    silent = Settings()
    environment.apply(silent, environ)
    assert silent["REDIS_URL"] == "redis://from-env:6379/0"
    assert silent["MONGO_URI"] == "mongodb://env/"
    written = Settings()
    written.set("REDIS_URL", "redis://settings-py:6379/0", "project")
    environment.apply(written, environ)
    assert written["REDIS_URL"] == "redis://settings-py:6379/0"
    given = Settings()
    environment.apply(given, environ)
    given.set("REDIS_URL", "redis://dash-s:6379/0", "cmdline")
    assert given["REDIS_URL"] == "redis://dash-s:6379/0"
    assert "LOG_LEVEL" not in environment.names  # logging is set up before the add-on


@pytest.mark.unit
def test_download_delay_becomes_the_clusters_rate_per_host_and_no_node_waits_it_out(caplog):
    with caplog.at_level(logging.INFO, "extensions.addon"):
        settings = applied({"DOWNLOAD_DELAY": 2})
    assert settings.getfloat("CLUSTER_HOST_RATE") == 0.5
    assert settings.getfloat("DOWNLOAD_DELAY") == 0
    [said] = [r.getMessage() for r in caplog.records if "DOWNLOAD_DELAY" in r.getMessage()]
    assert "0.5 requests/s from all nodes together" in said
    # given on the command line: the same
    assert applied({"DOWNLOAD_DELAY": 0.25}, "cmdline").getfloat("CLUSTER_HOST_RATE") == 4
    # a cluster rate set by the project wins; the node still adds no delay
    both = applied({"DOWNLOAD_DELAY": 1, "CLUSTER_HOST_RATE": 3})
    assert both.getfloat("CLUSTER_HOST_RATE") == 3 and both.getfloat("DOWNLOAD_DELAY") == 0
    # no delay: no rate
    assert applied({}).getfloat("CLUSTER_HOST_RATE") == 0


@pytest.mark.filterwarnings("ignore:The 'download_delay' spider attribute is deprecated")
def test_a_spiders_download_delay_is_the_clusters_rate_too(redis_url, redis_client):
    class Slow(Spider):
        name = "slow"
        download_delay = 0.5  # Scrapy 2.19 makes it DOWNLOAD_DELAY after the add-on ran

    crawler = crawler_with_addon(Slow, settings={"REDIS_URL": redis_url})
    assert crawler.settings.getfloat("DOWNLOAD_DELAY") == 0.5
    ClusterPolitenessMiddleware.from_crawler(crawler).publish_rates()
    assert float(redis_client.hget("slow:rates", "*")) == 2.0
    assert GatedDownloader(crawler)._delay == 0  # no node waits it out on top


def test_an_empty_answer_says_why(redis_url):
    common = ("-s", f"REDIS_URL={redis_url}")
    letters = scrapy("dlq", "shop", "list", *common)
    assert letters.returncode == 0 and letters.stdout == ""
    assert "no dead letters in shop:dlq" in letters.stderr
    ranks = scrapy("hostrank", "shop", "top", *common)
    assert ranks.returncode == 0 and "no host ranks yet" in ranks.stderr
    assert 'FRONTIER_ORDER = "importance"' in ranks.stderr
    addresses = scrapy("status", "shop", "--ips", *common)
    assert "no host has queued work" in addresses.stdout
    status = scrapy("status", "shop", *common)
    assert "no node has joined this crawl yet" in status.stdout


def test_status_shows_the_last_minutes_rate_and_folds_nodes_closed_long_ago(
    redis_url, redis_client
):
    keys = SpiderKeys.for_spider("shop")

    class Stats:
        def __init__(self, pages: int) -> None:
            self.pages = pages

        def get_stats(self) -> dict:
            return {"response_received_count": self.pages, "item_scraped_count": self.pages}

    long_ago = Checkpoint(redis_client, keys, "node-gone")
    long_ago.write(Stats(10), state="closed")
    # it closed twenty minutes ago (its last heartbeat, as the registry keeps it)
    redis_client.zadd(keys.nodes, {"node-gone": int((time.time() - 1200) * 1000)})
    alive = Checkpoint(redis_client, keys, "node-here", series_hours=1)
    alive.write(Stats(0))
    alive.write(Stats(120))  # 120 pages this minute, as the heartbeats add them up
    shown = scrapy("status", "shop", "-s", f"REDIS_URL={redis_url}")
    assert shown.returncode == 0, shown.stderr
    rate = next(line for line in shown.stdout.splitlines() if line.startswith("pages/s"))
    now = float(rate.split()[1])
    assert "last min" in rate and 1.0 <= now <= 2.0  # 120 pages over 60 to 120 s
    assert "node-here" in shown.stdout and "node-gone" not in shown.stdout
    assert "1 node that closed more than 10 minutes ago (10 pages" in shown.stdout
    listed = json.loads(scrapy("status", "shop", "--json", "-s", f"REDIS_URL={redis_url}").stdout)
    assert {n["node"] for n in listed["nodes"]} == {"node-here", "node-gone"}


def test_a_command_whose_reader_went_away_ends_quietly(redis_url, redis_client):
    for n in range(3000):  # more than a pipe holds
        redis_client.rpush("shop:dlq", json.dumps({"url": f"http://a.test/{n}", "error": "x"}))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "scrapy", "dlq", "shop", "list", "-s", f"REDIS_URL={redis_url}"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()  # what `| head -1` reads, then it goes away
    proc.stdout.close()
    errors = proc.stderr.read().decode()
    proc.wait(60)
    assert "Traceback" not in errors and "BrokenPipeError" not in errors, errors[-2000:]


@pytest.mark.unit
def test_components_that_are_off_say_so_at_info_not_as_warnings(caplog):
    crawler = crawler_with_addon(settings={"WARC_ENABLED": False})
    with caplog.at_level(logging.DEBUG), pytest.raises(NotConfigured) as raised:
        WarcMiddleware.from_crawler(crawler)
    assert not raised.value.args  # no message for Scrapy to log as a WARNING
    said = [r for r in caplog.records if "WARC_ENABLED is off" in r.getMessage()]
    assert [r.levelname for r in said] == ["INFO"]


@pytest.mark.unit
def test_the_console_offers_no_pause_for_a_finished_crawl_and_no_empty_recrawl_table():
    console = Console(None, None)  # type: ignore[arg-type]
    macros = console.env.get_template("_macros.html").module
    running = CrawlFigures(crawl="a", state="running", queued=3)
    finished = CrawlFigures(crawl="b", state="running", done=7)
    shown = [running.as_dict(), finished.as_dict()]
    assert shown[1]["state"] == "finished"
    table = str(macros.crawls_table("shop", shown, LOCAL))  # type: ignore[attr-defined]
    rows = table.split("<tr data-crawl=")[1:]
    assert "Pause" in rows[0] and "Pause" not in rows[1]
    assert "Stop" in rows[1]  # a finished crawl may still be stopped (its id ended)


def test_the_crawl_without_an_id_counts_its_own_items(redis_client):
    keys = SpiderKeys.for_spider("shop")

    class Stats:
        def get_stats(self) -> dict:
            return {"item_scraped_count": 9, ITEMS_WITHOUT_ID: 4}

    Checkpoint(redis_client, keys, "n1").write(Stats())
    crawls = Crawls(redis_client, keys)
    crawls.register("named")
    # the named crawl's items reach Redis at another moment than the total: the
    # crawl without an id shows what its own nodes counted, not the difference
    redis_client.hset(keys.crawl("named"), "items", 2)
    progress = Checkpoint(redis_client, keys, "").crawl_progress()
    sizes = Frontier(redis_client, keys, node_id="").sizes()
    rest = crawls.without_id(sizes, progress, [crawls.figures("named")])
    assert rest.items == 4


def test_a_robots_txt_that_fails_is_dead_lettered_under_the_crawl_that_needed_it(
    redis_url, redis_client, nodes
):
    gone = f"http://127.0.0.1:{services.free_port()}"  # a server that went away
    seeded = scrapy("seed", "shop", f"{gone}/page", "--crawl", "spring", "-s",
                    f"REDIS_URL={redis_url}")  # fmt: skip
    assert seeded.returncode == 0, seeded.stderr

    def robots_letter() -> dict | None:
        for raw in redis_client.lrange("shop:dlq", 0, -1):
            record = json.loads(raw)
            if record.get("url", "").endswith("/robots.txt"):
                return record
        return None

    nodes.start("shop", redis_url)
    wait_for(lambda: robots_letter() is not None, 90, "robots.txt dead-lettered")
    nodes.stop_all()
    assert robots_letter()["crawl"] == "spring"
    assert int(redis_client.hget("shop:crawl:spring", "dlq") or 0) >= 1
