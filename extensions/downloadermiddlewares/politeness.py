"""Politeness across the whole cluster, decided when work is leased.

The lease (``scripts/lease.lua``) hands a queue group (a host, by default) out
again only once its next allowed time has come, from the rates every lease
reads in ``NAME:rates``: ``CLUSTER_HOST_RATE`` requests per second per host from
all nodes together, ``CLUSTER_HOST_RATES`` (``{"example.com": 2}``) per host;
0 or unset means no limit. No request waits in Redis for politeness and no
request costs a round trip of its own. This middleware publishes the rates
when a node opens (the last node started sets them, so a changed rate applies
to the next lease), and, with ``ROBOTSTXT_OBEY``, each host's robots.txt
``Crawl-delay`` (at most ``CLUSTER_CRAWL_DELAY_MAX`` seconds) into
``NAME:crawl_delay``. ``CLUSTER_DOMAIN_RATE`` and ``CLUSTER_IP_RATE`` go in as
``*domain`` and ``*ip`` (frontier/hosts/levels.py). A project's ``DOWNLOAD_DELAY``
(or a spider's ``download_delay``) becomes ``CLUSTER_HOST_RATE`` unless that is set
(addon.py, and here), so no node waits it out on top. Scrapy's per-node limits still apply.
Nodes' clocks should be NTP-synchronised.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import redis
from protego import Protego
from scrapy import signals

from extensions import connection
from extensions.frontier.groups import group_for
from extensions.installed import require_addon
from extensions.keys import SpiderKeys

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)

DEFAULT_RATE_FIELD = "*"
# CLUSTER_DOMAIN_RATE and CLUSTER_IP_RATE (no host name starts with '*')
DOMAIN_RATE_FIELD = "*domain"
IP_RATE_FIELD = "*ip"


class ClusterPolitenessMiddleware:
    def __init__(
        self,
        crawler: Crawler,
        server: redis.Redis,
        keys: SpiderKeys,
        default_rate: float,
        host_rates: dict[str, float],
    ):
        self.crawler = crawler
        self.stats = crawler.stats
        self.server = server
        self.keys = keys
        self.default_rate = default_rate
        self.host_rates = {host.lower(): float(rate) for host, rate in host_rates.items()}
        settings = crawler.settings
        self.domain_rate = settings.getfloat("CLUSTER_DOMAIN_RATE")
        self.ip_rate = settings.getfloat("CLUSTER_IP_RATE")
        self.obey_robots = settings.getbool("ROBOTSTXT_OBEY")
        self.robots_agent = settings.get("ROBOTSTXT_USER_AGENT") or settings.get("USER_AGENT")
        self.queue_by = settings.get("FRONTIER_QUEUE_BY")
        self._delays_published: set[str] = set()
        self.health = connection.health_for(crawler)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ClusterPolitenessMiddleware:
        require_addon(crawler.settings, cls.__name__)
        s = crawler.settings
        rate = s.getfloat("CLUSTER_HOST_RATE")
        # a DOWNLOAD_DELAY still here came after the add-on made the project's the
        # cluster's (Scrapy 2.19 sets it from a spider's download_delay then): the
        # same for it; the node's downloader waits for nothing (downloader.py)
        delay = s.getfloat("DOWNLOAD_DELAY")
        if delay > 0 and not connection.set_by_project(s, "CLUSTER_HOST_RATE"):
            rate = 1 / delay
            logger.info(
                "DOWNLOAD_DELAY = %s s holds for the whole cluster: each host gets at most "
                "%.3g requests/s from all nodes together; nodes add no delay of their own",
                delay, rate,
            )  # fmt: skip
        host_rates = s.getdict("CLUSTER_HOST_RATES")
        if rate < 0 or any(float(r) < 0 for r in host_rates.values()):
            raise ValueError("CLUSTER_HOST_RATE and CLUSTER_HOST_RATES must not be negative")
        assert crawler.spidercls is not None
        server = connection.client_for(crawler)
        middleware = cls(crawler, server, SpiderKeys.for_crawler(crawler), rate, host_rates)
        crawler.signals.connect(middleware.publish_rates, signal=signals.spider_opened)
        return middleware

    def rate_for(self, host: str) -> float:
        return self.host_rates.get(host, self.default_rate)

    def publish_rates(self) -> None:
        """Write this node's rates for every lease to read (replacing the last ones)."""
        rates = {DEFAULT_RATE_FIELD: self.default_rate, **self.host_rates,
                 DOMAIN_RATE_FIELD: self.domain_rate, IP_RATE_FIELD: self.ip_rate}  # fmt: skip
        # (a sharded frontier's leases read their own shard's copy; one
        # transaction per copy, as the copies live in different hash slots)
        pipe = self.server.pipeline(transaction=self.keys.shards == 1)
        # (and the crawl's own, where a sharded frontier's levels are claimed)
        copies = self.keys.all_shards() + ([self.keys] if self.keys.shards > 1 else [])
        for keys in copies:
            pipe.delete(keys.rates)
            pipe.hset(keys.rates, mapping=rates)  # type: ignore[arg-type]
        try:
            pipe.execute()
        except redis.RedisError as exc:
            logger.error("could not publish the cluster's host rates: %s", exc)
            return
        limited = {host: rate for host, rate in rates.items() if rate}
        if limited:
            logger.info("cluster-wide host rates (requests/s): %s", limited)

    def process_response(self, request: Request, response: Response) -> Response:
        if self.obey_robots and response.status == 200 and request.url.endswith("/robots.txt"):
            self._publish_crawl_delay(request, response)
        return response

    def _publish_crawl_delay(self, request: Request, response: Response) -> None:
        group = group_for(request.url, request.meta.get("download_slot"), self.queue_by)
        if group in self._delays_published:
            return
        self._delays_published.add(group)
        try:
            parser = Protego.parse(response.body.decode("utf-8", "replace"))
            delay = parser.crawl_delay(self.robots_agent or "*")
        except Exception:  # a hostile robots.txt: no delay from it
            delay = None
        if not delay or delay <= 0:
            return
        try:
            shard = self.keys.shard(self.keys.shard_of(group))
            self.server.hset(shard.crawl_delay, group, float(delay))
        except redis.RedisError as exc:
            self.health.failed(exc)
            return
        self.stats.inc_value("politeness/crawl_delay_hosts")
        logger.info("%s asks for a Crawl-delay of %ss across the cluster", group, delay)
