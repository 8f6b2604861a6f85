"""Cluster-wide politeness: three nodes share one per-host rate."""

import json
import urllib.request

from tests.test_chaos import ALLOW
from tools import services

RATE = 10  # requests per second to the limited host, from all nodes together


def request_times(site) -> list[float]:
    with urllib.request.urlopen(site.url + "/__times", timeout=10) as response:
        times = json.load(response)
    return sorted(t for path, ts in times.items() if path != "/robots.txt" for t in ts)


def test_three_nodes_hold_a_host_to_the_cluster_rate_while_another_runs_free(
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
                CLUSTER_HOST_RATES=json.dumps({"127.0.0.1": RATE}),
            )  # fmt: skip
        assert nodes.wait(180) == [0, 0, 0], nodes.tail()

        slow, fast = request_times(limited), request_times(free)
        assert len(slow) == len(fast) > 100
        slow_rate = (len(slow) - 1) / (slow[-1] - slow[0])
        fast_rate = (len(fast) - 1) / (fast[-1] - fast[0])
        assert 0.9 * RATE <= slow_rate <= 1.1 * RATE, f"{slow_rate:.1f}/s"
        # No second of the crawl saw more than the limit (plus one for the window's edge).
        per_second = {}
        for t in slow:
            per_second[int(t - slow[0])] = per_second.get(int(t - slow[0]), 0) + 1
        assert max(per_second.values()) <= RATE + 1, per_second
        assert fast_rate > 3 * RATE, f"the unlimited host went at {fast_rate:.1f}/s"
        assert fast[-1] < slow[-1]
        assert sum(n for i in range(3) for n in [nodes.log(i).count("politeness/parked")]) > 0
    finally:
        limited.stop()
        free.stop()
