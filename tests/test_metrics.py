"""Status and Prometheus metrics against real multi-node crawls."""

import json
import re
import signal
import socket
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from extensions.observability.metrics import parse_ports
from servers import services
from tests.conftest import ROOT, queue_requests, scrapy
from tests.helpers import ALLOW, wait_for


def scrape(port: int) -> dict[str, list]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {family.name: family.samples for family in text_string_to_metric_families(text)}


def sample_names(families: dict[str, list]) -> set[str]:
    return {sample.name for samples in families.values() for sample in samples}


def test_metrics_port_forms():
    assert parse_ports("") == parse_ports("0") == []
    assert parse_ports("9410") == [9410]
    assert parse_ports("9410-9412") == [9410, 9411, 9412]
    with pytest.raises(ValueError, match="METRICS_PORT"):
        parse_ports("94x0")
    with pytest.raises(ValueError, match="valid"):
        parse_ports("9420-9410")


@pytest.fixture
def slow_site():
    service = services.start_demo_site(latency=0.1)
    yield service
    service.stop()


def test_two_nodes_serve_metrics_and_status_adds_up(redis_url, redis_client, slow_site, nodes):
    first = services.free_port()
    ports = f"{first}-{first + 9}"
    redis_client.lpush(
        "site:start_urls", slow_site.url + "/category/books", slow_site.url + "/flaky/"
    )
    # MAX_IDLE_TIME_BEFORE_CLOSE keeps m1 up after the crawl, to be asked once m2 is dead.
    settings = {"MAX_IDLE_TIME_BEFORE_CLOSE": 8, "CONCURRENT_REQUESTS": 4, "METRICS_PORT": ports,
                "METRICS_ADDRESS": "127.0.0.1", "DOWNLOAD_TIMEOUT": 2, "RETRY_TIMES": 2,
                "RETRY_BACKOFF_BASE": 0.2, "RETRY_BACKOFF_MAX": 1, "NODE_HEARTBEAT_INTERVAL": 0.5,
                "NODE_TIMEOUT": 3}  # fmt: skip
    for n in (1, 2):
        nodes.start("site", redis_url, spider_args={"allow": ALLOW}, NODE_ID=f"m{n}", **settings)
    wait_for(
        lambda: all("Prometheus metrics on port" in nodes.log(i) for i in (0, 1)), 60, "metrics"
    )
    m1_port, m2_port = (
        int(re.search(r"metrics on port (\d+)", nodes.log(i)).group(1)) for i in (0, 1)
    )
    assert m1_port != m2_port  # the later node took the next free port of the range
    assert first in (m1_port, m2_port) and first <= max(m1_port, m2_port) <= first + 9

    wait_for(lambda: int(redis_client.hget("site:checkpoint", "done") or 0) > 20, 60, "progress")
    # (a node a busy machine started late may not have fetched yet: it will)
    wait_for(lambda: scrape(m1_port)["crawler_requests"][0].value > 0, 60, "m1 fetching")
    families = scrape(m1_port)
    assert families["crawler_requests"][0].value > 0
    assert {s.labels["part"] for s in families["crawler_frontier"]} >= {
        "queued",
        "in_flight",
        "delayed",
        "dlq",
    }
    assert {s.labels["node"] for s in families["crawler_node_up"]} == {"m1", "m2"}
    assert any(s.name.endswith("_bucket") for s in families["crawler_download_latency_seconds"])

    # The dashboard refers only to metrics a node exposes.
    exposed = sample_names(families) | sample_names(scrape(m2_port))
    dashboard = json.loads((ROOT / "deploy" / "grafana-dashboard.json").read_text())
    used = {
        name
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for name in re.findall(r"\b(crawler_[a-z_]+)", target["expr"])
    }
    assert used and used <= exposed, used - exposed

    # A node killed mid-crawl shows as dead in status and in the metrics.
    nodes.procs[1].send_signal(signal.SIGKILL)
    nodes.procs[1].wait(10)
    wait_for(lambda: _state(redis_url, "m2") == "dead", 30, "dead node")
    up = {s.labels["node"]: s.value for s in scrape(m1_port)["crawler_node_up"]}
    assert up == {"m1": 1.0, "m2": 0.0}

    assert nodes.procs[0].wait(120) == 0, nodes.tail()
    status = json.loads(scrapy("status", "site", "--json", "-s", f"REDIS_URL={redis_url}").stdout)
    dead_letters = [json.loads(r) for r in redis_client.lrange("site:dlq", 0, -1)]
    assert (status["queued"], status["in_flight"], status["delayed"]) == (0, 0, 0)
    assert status["done"] + len(dead_letters) == status["discovered"] == status["seen"]
    assert len(dead_letters) == 3


def _state(redis_url: str, node: str) -> str:
    result = scrapy(
        "status", "site", "--json", "-s", f"REDIS_URL={redis_url}", "-s", "NODE_TIMEOUT=3"
    )
    return {n["node"]: n["state"] for n in json.loads(result.stdout)["nodes"]}.get(node, "")


def test_a_taken_metrics_port_is_a_warning_not_a_crash(redis_url, redis_client, demo_site, nodes):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        redis_client.lpush("shop:start_urls", demo_site.url + "/about")
        nodes.start("shop", redis_url, MAX_IDLE_TIME_BEFORE_CLOSE=1, METRICS_PORT=port,
                    METRICS_ADDRESS="127.0.0.1")  # fmt: skip
        assert nodes.wait(60) == [0], nodes.tail()
    assert f"METRICS_PORT {port}: no free port, metrics are off for this node" in nodes.log(0)


def test_status_watch_draws_progress_nodes_and_errors(redis_url, redis_client):
    now = time.time()
    redis_client.hset("shop:checkpoint", mapping={"done": 30, "pages": 32, "items": 25,
                                                  "started": now - 10, "updated": now})  # fmt: skip
    redis_client.hset("shop:dupefilter", "n", 40)  # the dupefilter's count of fingerprints
    queue_requests(redis_client, "shop", *(f'{{"url":"http://x/{i}"}}' for i in range(9)))
    redis_client.lpush("shop:dlq", json.dumps({"url": "http://x/z", "error": "HTTP 500"}))
    redis_client.zadd("shop:nodes", {"w1": int(now * 1000)})
    node = {"pages": 32, "items": 25, "state": "running", "last_progress": now - 500}
    redis_client.hset("shop:node:w1", mapping=node)
    result = scrapy("status", "shop", "--watch", "--count", "2", "--interval", "0.2",
                    "-s", f"REDIS_URL={redis_url}", "-s", "NODE_STALL_TIME=60")  # fmt: skip
    assert result.returncode == 0, result.stderr
    screens = [block for block in result.stdout.split("\n\n") if block.strip()]
    assert len(screens) == 2
    assert "30/40 done (75.0%)" in screens[0]
    assert "queued 9" in screens[0] and "dead-lettered 1" in screens[0]
    assert "top errors: HTTP 500 (1)" in screens[0]
    assert re.search(r"w1\s+stalled", screens[1])


def test_dns_lookups_and_failures_are_exported_by_kind(redis_url, redis_client):
    from scrapy import Spider

    from extensions.keys import SpiderKeys
    from extensions.observability.metrics import ClusterCollector
    from tests.conftest import crawler_with_addon

    crawler = crawler_with_addon(Spider.__class__("site", (Spider,), {"name": "site"}),
                                 {"REDIS_URL": redis_url})  # fmt: skip
    for key, count in {"dns/lookups": 7, "dns/shared": 3, "dns/nxdomain": 2,
                       "dns/servfail": 1}.items():  # fmt: skip
        crawler.stats.set_value(key, count)
    collector = ClusterCollector(crawler, redis_client, SpiderKeys.for_spider("site"), "n1")
    families = {family.name: family for family in collector.collect()}
    failures = {s.labels["kind"]: s.value for s in families["crawler_dns_failures"].samples
                if s.name.endswith("_total")}  # fmt: skip
    assert failures == {"nxdomain": 2, "servfail": 1, "no_address": 0, "timeout": 0,
                        "error": 0, "bad_record": 0}  # fmt: skip
    assert families["crawler_dns_lookups"].samples[0].value == 7
    assert families["crawler_dns_shared"].samples[0].value == 3
