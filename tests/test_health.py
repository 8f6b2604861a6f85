"""A live node's ``/healthz`` and ``/readyz``, as Kubernetes probes ask them."""

import urllib.error
import urllib.request

from servers import services
from servers.clients import redis_at
from tests.helpers import wait_for


def probe(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except OSError as error:  # not listening yet
        return 0, str(error)


def test_a_node_is_healthy_then_stalled_then_not_ready_without_redis(nodes, tmp_path):
    server = services.start_redis(tmp_path / "redis")
    quick = services.start_demo_site()
    hanging = services.start_demo_site(latency=60)  # every answer takes a minute
    try:
        client = redis_at(server.url)
        client.lpush("site:start_urls", quick.url + "/about")
        port = services.free_port()
        nodes.start(
            "site", server.url, spider_args={"allow": "/about$"}, METRICS_PORT=port,
            METRICS_ADDRESS="127.0.0.1", MAX_IDLE_TIME_BEFORE_CLOSE=0, NODE_STALL_TIME=2,
            HEALTH_REDIS_GRACE=600, DOWNLOAD_TIMEOUT=120, CONCURRENT_REQUESTS=1,
        )  # fmt: skip
        wait_for(lambda: probe(port, "/readyz")[0] == 200, 60, "the node ready")
        wait_for(lambda: client.hget("site:checkpoint", "done") == b"1", 60, "the page done")
        # Idle with no work anywhere is not stalled, however long it lasts.
        assert probe(port, "/healthz") == (200, "ok\n")
        assert probe(port, "/metrics")[1].startswith("# HELP")  # the metrics still there

        client.lpush("site:start_urls", hanging.url + "/about")
        wait_for(lambda: probe(port, "/healthz")[0] == 503, 60, "the node seen stalled")
        status, body = probe(port, "/healthz")
        assert "stalled: no response for" in body and "NODE_STALL_TIME=2" in body
        assert probe(port, "/readyz") == (200, "ok\n")  # stalled, but it could take work

        server.stop()
        status, body = probe(port, "/readyz")
        assert status == 503 and "Redis does not answer" in body
        # Within HEALTH_REDIS_GRACE an outage makes the node unready, not restarted.
        assert probe(port, "/healthz") == (200, "ok\n")
    finally:
        for node in nodes.procs:  # its download hangs for a minute: no graceful stop
            node.kill()
        nodes.stop_all()
        quick.stop()
        hanging.stop(timeout=2)  # its handler sleeps: no graceful stop to wait for
        server.stop()
