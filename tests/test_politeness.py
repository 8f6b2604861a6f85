"""Cluster-wide politeness, decided when work is leased: three nodes share one
per-host rate, a rate changed mid-crawl applies at once, robots.txt's
Crawl-delay holds for the whole cluster, and nothing waits in NAME:delayed."""

import itertools
import json
import time
import urllib.request

import pytest

from demosite import catalog
from servers import services
from tests.conftest import scrapy
from tests.helpers import ALLOW

RATE = 10  # requests per second to the limited host, from all nodes together
FASTER = 20  # the rate it is changed to mid-crawl

# Two copies of the demo shop stand for two sites here: content duplicates (on by
# default) would take the second for a mirror of the first, and follow none of its links
DISTINCT_SITES = {"CONTENT_DUPLICATES": "off"}


def request_times(site) -> list[float]:
    with urllib.request.urlopen(site.url + "/__times", timeout=10) as response:
        times = json.load(response)
    return sorted(t for path, ts in times.items() if path != "/robots.txt" for t in ts)


def busiest_second(times: list[float]) -> int:
    """The most requests in any one-second window starting at a request."""
    most, start = 0, 0
    for end, t in enumerate(times):
        while t - times[start] >= 1.0:
            start += 1
        most = max(most, end - start + 1)
    return most


def rate_of(times: list[float]) -> float:
    return (len(times) - 1) / (times[-1] - times[0])


@pytest.mark.paced  # a host's requests per second, measured at the host
def test_three_nodes_hold_a_host_to_the_cluster_rate_and_a_changed_rate_applies_at_once(
    redis_url, redis_client, nodes
):
    limited = services.start_demo_site()
    free = services.start_demo_site()
    try:
        # Same machine, two host names: 127.0.0.1 is limited, localhost is not.
        free_url = free.url.replace("127.0.0.1", "localhost")
        redis_client.lpush("site:start_urls", limited.url + "/category/books",
                           free_url + "/category/books")  # fmt: skip
        for _ in range(3):
            nodes.start(
                "site", redis_url, spider_args={"allow": ALLOW}, MAX_IDLE_TIME_BEFORE_CLOSE=2,
                CLUSTER_HOST_RATES=json.dumps({"127.0.0.1": RATE}), **DISTINCT_SITES,
            )  # fmt: skip
        deadline = time.monotonic() + 60
        while len(request_times(limited)) < 60 and time.monotonic() < deadline:
            time.sleep(0.2)
        redis_client.hset("site:rates", "127.0.0.1", FASTER)  # applies to the next lease
        changed_at = time.time()
        assert nodes.wait(180) == [0, 0, 0], nodes.tail()

        slow, fast = request_times(limited), request_times(free)
        assert len(slow) == len(fast) > 100
        before = [t for t in slow if t < changed_at]
        after = [t for t in slow if t > changed_at + 1 / RATE]  # the lease given at RATE
        assert 0.85 * RATE <= rate_of(before) <= 1.1 * RATE, f"{rate_of(before):.1f}/s"
        assert 0.85 * FASTER <= rate_of(after) <= 1.1 * FASTER, f"{rate_of(after):.1f}/s"
        # Hand-outs are spaced; a node sends what it is handed as soon as it can, so one
        # held up (its first robots.txt fetch for the host) may send one late, next to
        # the following one. Once the nodes are warm, no second saw more than the limit
        # (plus one for the window's edge).
        warm = [t for t in before if t > slow[0] + 2]
        assert busiest_second(warm) <= RATE + 1
        assert busiest_second(before) <= RATE + 3
        assert busiest_second(after) <= FASTER + 1
        assert rate_of(fast) > 3 * FASTER, f"the unlimited host went at {rate_of(fast):.1f}/s"
        assert fast[-1] < slow[-1]
        logs = [nodes.log(i) for i in range(3)]
        # nothing was parked for politeness: it waited in its host's queue
        assert nodes.total("frontier/delayed") == 0
        assert all("Traceback" not in log for log in logs)
    finally:
        limited.stop()
        free.stop()


@pytest.mark.paced  # a host's requests per second, measured at the host
def test_a_crawl_delay_in_robots_txt_holds_for_the_whole_cluster(redis_url, redis_client, nodes):
    delay = 0.25
    site = services.start_demo_site(crawl_delay=delay)
    try:
        redis_client.lpush("site:start_urls", site.url + "/category/books")
        for _ in range(2):
            nodes.start("site", redis_url, spider_args={"allow": "/category/books,/product/"},
                        MAX_IDLE_TIME_BEFORE_CLOSE=2, CLOSESPIDER_PAGECOUNT=12)  # fmt: skip
        assert nodes.wait(120) == [0, 0], nodes.tail()
        times = request_times(site)
        assert len(times) >= 12
        assert float(redis_client.hget("site:crawl_delay", "127.0.0.1")) == delay
        # the first few may go before robots.txt is read; after that, one per delay
        assert busiest_second(times[3:]) <= 1 / delay + 1
        assert rate_of(times[3:]) <= 1.1 / delay
    finally:
        site.stop()


@pytest.mark.paced  # a host's requests per second, measured at the host
def test_a_small_host_is_not_held_back_by_a_large_rate_limited_one(redis_url, redis_client, nodes):
    """The whole shop (2,000+ pages) at 20/s on one host, the same shop unlimited on
    another: the second host's first category is done while the first host has
    fetched a fraction, at its own pace."""
    large = services.start_demo_site()
    small = services.start_demo_site()
    try:
        small_url = small.url.replace("127.0.0.1", "localhost")
        # the large host is pushed first, and its URLs sort first
        redis_client.lpush("site:start_urls", large.url + "/", small_url + "/category/books")
        nodes.start("site", redis_url, MAX_IDLE_TIME_BEFORE_CLOSE=2,
                    CLUSTER_HOST_RATES=json.dumps({"127.0.0.1": 20}), **DISTINCT_SITES)  # fmt: skip
        expected_small = 1 + (catalog.pages_in("books") - 1) + len(catalog.product_ids("books"))
        deadline = time.monotonic() + 120
        while len(request_times(small)) < expected_small and time.monotonic() < deadline:
            time.sleep(0.2)
        small_times, large_times = request_times(small), request_times(large)
        assert len(small_times) >= expected_small, nodes.tail()
        # all of the small host came while the large one moved at its own pace
        during = [t for t in large_times if t <= small_times[-1]]
        # Arrival times are the site's: the first request of the large host may come
        # late (a new connection, a loaded machine) and shorten the window it is
        # counted over; half a second of that (10 requests) is allowed. Unpaced,
        # the host would have had hundreds.
        window = small_times[-1] - large_times[0]
        gaps = [round(b - a, 3) for a, b in itertools.pairwise(large_times[:11])]
        assert len(during) <= 20 * window + 2 + 10, (len(during), window, gaps)
        assert len(during) < catalog.total_products() / 4
        status = json.loads(
            scrapy("status", "site", "--hosts", "--json", "-s", f"REDIS_URL={redis_url}").stdout
        )
        hosts = {row["host"]: row for row in status["hosts"]}
        assert hosts["127.0.0.1"]["queued"] > 0 and hosts["127.0.0.1"]["rate"] == 20
        # (fetched or still in flight: leases are released every 0.2 s)
        small_leased = hosts["localhost"]["fetched"] + hosts["localhost"]["in_flight"]
        assert hosts["localhost"]["rate"] == 0 and small_leased > len(during)
        nodes.stop_all()
        assert "'frontier/dequeued'" in nodes.log(0)  # the closing stats
        assert nodes.stat(0, "frontier/delayed") == 0  # nothing parked for politeness
    finally:
        nodes.stop_all()
        large.stop()
        small.stop()
