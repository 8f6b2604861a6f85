"""Prometheus metrics of a node, on ``METRICS_PORT`` (``9410``, or a range such
as ``9410-9419`` so several nodes of one machine each take the first free port).

Counters and the download latency histogram are kept as the crawl runs; the
frontier gauges (queued, in flight, delayed, dead-lettered, seen, done) and the
per-node health come from Redis when Prometheus scrapes, so every node reports
the whole cluster. Served in a thread of its own, with ``/healthz`` and
``/readyz`` for probes (``health.py``); every other path answers the metrics. A
port that is taken is a warning, not a crash.
"""

from __future__ import annotations

import logging
import threading
from http.server import ThreadingHTTPServer
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import redis
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import MetricsHandler
from scrapy import signals
from scrapy.exceptions import NotConfigured

from extensions import connection
from extensions.cluster.checkpoint import node_id_for
from extensions.frontier.crawls.state import Crawls
from extensions.frontier.part import StatusParts
from extensions.keys import SpiderKeys
from extensions.observability.health import NodeHealth
from extensions.observability.status import crawl_status

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)

#: a crawl's figures exported per crawl id, and at most how many crawls
CRAWL_PARTS = ("queued", "in_flight", "delayed", "done", "items", "dlq")
MAX_CRAWLS_EXPORTED = 200
LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
#: stats counters exported as Prometheus counters: metric name -> stats key
STATS_COUNTERS = {
    "crawler_retries_total": "retry/count",
    "crawler_dead_lettered_total": "retry/dead_lettered",
    "crawler_proxy_bans_total": "proxies/banned",
    "crawler_items_dropped_total": "item_dropped_count",
    "crawler_redis_errors_total": "redis/errors",
    "crawler_items_spilled_total": "mongo/spilled",
    "crawler_proxies_all_resting_total": "proxies/all_resting_waits",
    "crawler_host_pushbacks_total": "hosts/pushbacks/push",
    "crawler_bans_total": "bans/detected",
    "crawler_dns_lookups_total": "dns/lookups",
    "crawler_dns_shared_total": "dns/shared",
    "crawler_tls_connections_total": "tls/connections",
    "crawler_tls_handshakes_total": "tls/handshakes",
    "crawler_tls_resumed_total": "tls/resumed",
}
#: DNS failures by kind (the ``kind`` label): stats key
DNS_FAILURES = {
    "nxdomain": "dns/nxdomain",
    "servfail": "dns/servfail",
    "no_address": "dns/no_address",
    "timeout": "dns/timeouts",
    "error": "dns/errors",
    "bad_record": "dns/bad_records",
}


def parse_ports(value: str) -> list[int]:
    """``"9410"`` -> [9410]; ``"9410-9419"`` -> [9410 ... 9419]; ``""``/``"0"`` -> []."""
    value = str(value or "").strip()
    if value in ("", "0"):
        return []
    low, _, high = value.partition("-")
    try:
        first, last = int(low), int(high or low)
    except ValueError:
        raise ValueError(
            f"METRICS_PORT must be a port or a range like 9410-9419, not {value!r}"
        ) from None
    if not 0 < first <= last < 65536:
        raise ValueError(f"METRICS_PORT {value!r} is not a valid port range")
    return list(range(first, last + 1))


class ClusterCollector:
    """Read at scrape time: this node's stats counters and the cluster's frontier."""

    def __init__(self, crawler: Crawler, server: redis.Redis, keys: SpiderKeys, node_id: str):
        self.crawler = crawler
        self.server = server
        self.keys = keys
        self.node_id = node_id
        s = crawler.settings
        self.node_timeout = s.getfloat("NODE_TIMEOUT")
        self.stall_time = s.getfloat("NODE_STALL_TIME")
        self.parts = StatusParts.from_settings(s)

    def collect(self):
        labels = [self.keys.name, self.node_id]
        stats = self.crawler.stats.get_stats() if self.crawler.stats else {}
        for name, key in STATS_COUNTERS.items():
            family = CounterMetricFamily(name, f"{key} on this node", labels=["spider", "node"])
            family.add_metric(labels, float(stats.get(key, 0)))
            yield family
        dns = CounterMetricFamily(
            "crawler_dns_failures_total",
            "names this node could not resolve, by kind (DNS_SHARED)",
            labels=["spider", "node", "kind"],
        )
        for kind, key in DNS_FAILURES.items():
            dns.add_metric([*labels, kind], float(stats.get(key, 0)))
        yield dns
        try:
            status = crawl_status(
                self.server,
                self.keys,
                self.node_timeout,
                self.stall_time,
                hours_ahead=0,
                parts=self.parts,
            )
        except redis.RedisError as exc:
            logger.debug("metrics: Redis unavailable (%s)", exc)
            return
        frontier = GaugeMetricFamily(
            "crawler_frontier", "the cluster's frontier by part", labels=["spider", "part"]
        )
        for part in ("queued", "in_flight", "delayed", "dlq", "seen", "start_urls", "due"):
            frontier.add_metric([self.keys.name, part], status.get(part, 0))
        # of the queued, what waits for a render node (the render lane)
        frontier.add_metric([self.keys.name, "render_queued"], status.get("render_queued", 0))
        # of the queued, what is in MongoDB (FRONTIER_OVERFLOW)
        frontier.add_metric([self.keys.name, "spilled"], status.get("spilled", 0))
        yield frontier
        render_nodes = GaugeMetricFamily(
            "crawler_render_nodes", "render nodes that heart-beat", labels=["spider"]
        )
        render_nodes.add_metric([self.keys.name], status["render_nodes"])
        yield render_nodes
        hosts = GaugeMetricFamily(
            "crawler_hosts",
            "queue groups (hosts) with work, those ready to be leased now, those held "
            "because they pushed back (backing_off), and of them those that ban the crawl",
            labels=["spider", "state"],
        )
        hosts.add_metric([self.keys.name, "with_work"], status["hosts"])
        hosts.add_metric([self.keys.name, "ready"], status["ready_hosts"])
        hosts.add_metric([self.keys.name, "backing_off"], status["held_hosts"])
        hosts.add_metric([self.keys.name, "banned"], status["banned_hosts"])
        yield hosts
        done = GaugeMetricFamily("crawler_done", "requests done, whole cluster", labels=["spider"])
        done.add_metric([self.keys.name], status["done"])
        yield done
        up = GaugeMetricFamily(
            "crawler_node_up", "1 if the node heart-beats", labels=["spider", "node"]
        )
        stalled = GaugeMetricFamily(
            "crawler_node_stalled",
            "1 if alive but making no progress while work waits",
            labels=["spider", "node"],
        )
        heartbeat_age = GaugeMetricFamily(
            "crawler_node_heartbeat_age_seconds",
            "seconds since the node's heartbeat",
            labels=["spider", "node"],
        )
        for node in status["nodes"]:
            node_labels = [self.keys.name, node["node"]]
            up.add_metric(node_labels, 1 if node["alive"] else 0)
            stalled.add_metric(node_labels, 1 if node["stalled"] else 0)
            heartbeat_age.add_metric(node_labels, node["seconds_since_heartbeat"])
        yield up
        yield stalled
        yield heartbeat_age
        try:
            yield from self._crawls()
        except redis.RedisError as exc:
            logger.debug("metrics: Redis unavailable (%s)", exc)

    def _crawls(self):
        """The crawls under an id that are running or paused (finished, stopped
        and expired ones drop out, so the labels stay bounded)."""
        family = GaugeMetricFamily(
            "crawler_crawl",
            "one crawl of the spider (scrapy seed --crawl ID) by part",
            labels=["spider", "crawl", "part"],
        )
        paused = GaugeMetricFamily(
            "crawler_crawl_paused", "1 if the crawl is paused", labels=["spider", "crawl"]
        )
        crawls = Crawls(self.server, self.keys)
        live = [c for c, state in crawls.states().items() if state in ("running", "paused")]
        for crawl in live[:MAX_CRAWLS_EXPORTED]:
            figures = crawls.figures(crawl)
            if figures.shown_state not in ("running", "paused"):
                continue
            for part in CRAWL_PARTS:
                family.add_metric([self.keys.name, crawl, part], getattr(figures, part))
            paused.add_metric([self.keys.name, crawl], 1 if figures.state == "paused" else 0)
        yield family
        yield paused


class ProbeHandler(MetricsHandler):
    """The metrics on every path but the two probes'."""

    health: NodeHealth

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        if path not in ("/healthz", "/readyz"):
            super().do_GET()
            return
        problems = self.health.liveness() if path == "/healthz" else self.health.readiness()
        body = ("\n".join(problems) if problems else "ok").encode() + b"\n"
        self.send_response(503 if problems else 200)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class PrometheusMetrics:
    def __init__(self, crawler: Crawler, ports: list[int]):
        assert crawler.spidercls is not None
        self.crawler = crawler
        self.ports = ports
        self.node_id = node_id_for(crawler)
        self.keys = SpiderKeys.for_crawler(crawler)
        self.registry = CollectorRegistry()
        labels = ["spider", "node"]
        self.requests = Counter(
            "crawler_requests", "requests sent to the downloader", labels, registry=self.registry
        )
        self.responses = Counter(
            "crawler_responses",
            "responses by HTTP status",
            [*labels, "status"],
            registry=self.registry,
        )
        self.items = Counter(
            "crawler_items_written", "items stored", labels, registry=self.registry
        )
        self.latency = Histogram(
            "crawler_download_latency_seconds",
            "download latency",
            labels,
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        # a client of its own: the probes answer from their thread however busy the reactor is
        server = connection.from_settings(crawler.settings, ping=False)
        self.registry.register(ClusterCollector(crawler, server, self.keys, self.node_id))
        self.health = NodeHealth(crawler, server, self.keys, self.node_id)
        self.http: ThreadingHTTPServer | None = None
        self._requests = self.requests.labels(*self._labels)
        self._items = self.items.labels(*self._labels)
        self._latency = self.latency.labels(*self._labels)
        self._by_status: dict[int, Counter] = {}
        self.port: int | None = None
        self.address = crawler.settings.get("METRICS_ADDRESS")

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> PrometheusMetrics:
        ports = parse_ports(crawler.settings.get("METRICS_PORT"))
        if not ports:
            raise NotConfigured  # METRICS_PORT unset or 0: off
        extension = cls(crawler, ports)
        crawler.signals.connect(extension.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(
            extension.request_reached, signal=signals.request_reached_downloader
        )
        crawler.signals.connect(extension.response_received, signal=signals.response_received)
        crawler.signals.connect(extension.item_scraped, signal=signals.item_scraped)
        return extension

    @property
    def _labels(self) -> tuple[str, str]:
        return self.keys.name, self.node_id

    def spider_opened(self, spider: Spider) -> None:
        handler = type(
            "NodeHandler", (ProbeHandler,), {"registry": self.registry, "health": self.health}
        )
        for port in self.ports:
            try:
                self.http = ThreadingHTTPServer((self.address, port), handler)
            except OSError:
                continue  # taken, most likely by another node of this machine
            self.http.daemon_threads = True
            threading.Thread(target=self.http.serve_forever, name="metrics", daemon=True).start()
            self.port = port
            logger.info("Prometheus metrics on port %d (probes: /healthz, /readyz)", port)
            return
        logger.warning(
            "METRICS_PORT %s: no free port, metrics are off for this node",
            self.crawler.settings.get("METRICS_PORT"),
        )

    # Labelled children are looked up once: these run for every request.

    def request_reached(self, request: Request, spider: Spider) -> None:
        self._requests.inc()

    def response_received(self, response: Response, request: Request, spider: Spider) -> None:
        child = self._by_status.get(response.status)
        if child is None:
            child = self._by_status[response.status] = self.responses.labels(
                *self._labels, str(response.status)
            )
        child.inc()
        latency = request.meta.get("download_latency")
        if latency is not None:
            self._latency.observe(latency)

    def item_scraped(self, item, response, spider: Spider) -> None:
        self._items.inc()
