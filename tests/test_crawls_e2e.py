"""Several crawls of one spider, end to end: real nodes, real Redis, the demo
shop, and the commands a person would type."""

import json
import signal
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from extensions.frontier.crawls.state import Crawls
from extensions.keys import SpiderKeys
from servers import services
from tests.conftest import read_items, scrapy
from tests.helpers import SMALL_SHOP, SMALL_SHOP_PAGES, page_hits, wait_for

SETTINGS = {"MAX_IDLE_TIME_BEFORE_CLOSE": 6, "NODE_TIMEOUT": 5, "LOGSTATS_INTERVAL": 1}


def command(redis_url: str, *args: str) -> str:
    result = scrapy(*args, "-s", f"REDIS_URL={redis_url}")
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.fixture
def slow_small_shop():
    """The shop of the first categories (520 pages), each page taking half a
    second: the crawls share about 30 pages/s, so each is still under way once a
    command (seconds of Python on a loaded machine) paused or stopped another."""
    site = services.start_demo_site(categories=SMALL_SHOP, latency=0.5)
    yield site
    site.stop()


def test_three_crawls_of_one_spider_paused_resumed_and_stopped(
    redis_url, redis_client, slow_small_shop, nodes, tmp_path
):
    crawls = Crawls(redis_client, SpiderKeys.for_spider("shop"))
    for crawl in ("alpha", "beta", "gamma"):
        out = command(redis_url, "seed", "shop", "--crawl", crawl, slow_small_shop.url + "/")
        assert f"(crawl {crawl})" in out
    for node in ("n1", "n2"):
        nodes.start("shop", redis_url, NODE_ID=node, **SETTINGS)

    # gamma stopped and alpha paused early on, both commands at once: on a loaded
    # machine one `scrapy` command took long enough for a crawl to finish its 519 pages
    wait_for(lambda: min(crawls.figures(c).done for c in ("alpha", "gamma")) >= 20, 120,
             "alpha and gamma under way")  # fmt: skip
    with ThreadPoolExecutor(2) as pool:
        stopping = pool.submit(command, redis_url, "stop", "shop", "--crawl", "gamma")
        pausing = pool.submit(command, redis_url, "pause", "shop", "--crawl", "alpha")
        assert "stopped crawl gamma of shop" in stopping.result()
        assert "paused crawl alpha of shop" in pausing.result()
    beta_at_pause = crawls.figures("beta").done

    # what alpha had in flight finishes; then nothing more of it while beta runs on
    wait_for(lambda: crawls.figures("alpha").in_flight == 0, 60, "alpha's last pages")
    paused_at = crawls.figures("alpha")
    assert paused_at.state == "paused" and paused_at.queued > 0
    wait_for(lambda: crawls.figures("beta").shown_state == "finished", 180, "beta finished")
    beta = crawls.figures("beta")
    assert beta.state == "running"  # the pause was alpha's alone
    if beta_at_pause < len(SMALL_SHOP_PAGES):  # (a slow machine's beta may be done by then)
        assert beta.done > beta_at_pause
    assert crawls.figures("alpha").done == paused_at.done

    gamma = crawls.figures("gamma")
    assert (gamma.state, gamma.queued) == ("stopped", 0) and gamma.removed > 0
    assert not list(redis_client.scan_iter("shop:queue:*#gamma"))

    # a node killed while alpha is paused loses nothing: the pause and its queue are in Redis
    nodes.procs[1].send_signal(signal.SIGKILL)
    nodes.procs[1].wait(30)
    listed = json.loads(command(redis_url, "crawls", "shop", "--json"))
    states = {row["crawl"]: row["state"] for row in listed["crawls"]}
    assert states == {"alpha": "paused", "beta": "finished", "gamma": "stopped"}
    # resumed before n3 starts: a node that finds only a paused crawl's work closes
    # once idle (MAX_IDLE_TIME_BEFORE_CLOSE), and a loaded machine's `scrapy resume`
    # once took longer than that
    assert "resumed crawl alpha of shop" in command(redis_url, "resume", "shop", "--crawl", "alpha")
    nodes.start("shop", redis_url, NODE_ID="n3", **SETTINGS)
    deadline = time.monotonic() + 240
    for index in (0, 2):
        nodes.procs[index].wait(max(deadline - time.monotonic(), 1))
        assert nodes.procs[index].returncode == 0, nodes.tail()

    # alpha and beta each fetched every page once; gamma only some, none twice
    hits = page_hits(slow_small_shop)
    assert set(hits) == SMALL_SHOP_PAGES
    assert {n for n in hits.values()} <= {2, 3}
    items = read_items(tmp_path / "items")
    by_crawl: dict[str, list[str]] = {}
    for item in items:
        by_crawl.setdefault(item["_crawl"], []).append(item["url"])
    products = {u for u in by_crawl["beta"]}
    assert len(products) == len(by_crawl["beta"]) == len(by_crawl["alpha"])
    assert set(by_crawl["alpha"]) == products
    assert len(set(by_crawl["gamma"])) == len(by_crawl["gamma"]) < len(products)
    assert sum(hits.values()) == 2 * len(SMALL_SHOP_PAGES) + gamma.done

    # the crawls' figures add up to the spider's
    figures = [crawls.figures(c) for c in ("alpha", "beta", "gamma")]
    assert sum(f.items for f in figures) == len(items)
    done = int(redis_client.hget("shop:checkpoint", "done"))
    assert sum(f.done for f in figures) == done == sum(hits.values())
    assert all(f.pending == 0 for f in figures)
    assert "crawls under an id: 2 running, 1 stopped" in command(redis_url, "status", "shop")
    one = json.loads(command(redis_url, "status", "shop", "--crawl", "alpha", "--json"))
    assert (one["state"], one["done"]) == ("finished", len(SMALL_SHOP_PAGES))


def test_bad_crawl_ids_and_unknown_crawls_get_one_line(redis_url, redis_client):
    result = scrapy(
        "seed", "shop", "--crawl", "no spaces", "http://a/", "-s", f"REDIS_URL={redis_url}"
    )
    assert result.returncode == 1
    assert result.stderr.strip().count("\n") == 0 and "crawl id" in result.stderr
    assert redis_client.llen("shop:start_urls") == 0
    for verb in ("pause", "resume", "stop"):
        result = scrapy(verb, "shop", "--crawl", "nope", "-s", f"REDIS_URL={redis_url}")
        assert result.returncode == 1, verb
        assert "no crawl 'nope' of shop" in result.stderr


def test_a_start_entry_with_a_bad_crawl_id_is_dead_lettered(
    redis_url, redis_client, demo_site, nodes
):
    redis_client.lpush(
        "shop:start_urls",
        json.dumps({"url": demo_site.url + "/about", "crawl": "bad id"}),
        json.dumps({"url": demo_site.url + "/about", "crawl": "good"}),
    )
    nodes.start("shop", redis_url, MAX_IDLE_TIME_BEFORE_CLOSE=1)
    assert nodes.wait(60) == [0], nodes.tail()
    (record,) = [json.loads(r) for r in redis_client.lrange("shop:dlq", 0, -1)]
    assert record["kind"] == "start_url" and "crawl id" in record["error"]
    assert page_hits(demo_site) == {"/about": 1}
    crawls = Crawls(redis_client, SpiderKeys.for_spider("shop"))
    assert crawls.ids() == ["good"]
    assert crawls.figures("good").done == 1
