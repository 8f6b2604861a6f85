"""Politeness across the whole cluster: at most ``CLUSTER_HOST_RATE`` requests
per second to any one host from all nodes together.

Each request reserves a send time for its host in Redis (``NAME:rate:HOST``,
one Lua call). A request whose time has come goes on; one that must wait is
parked in ``NAME:delayed`` until its reserved time (it holds no download slot
and does not block other hosts), then sent without asking again. Per-host
rates in ``CLUSTER_HOST_RATES`` (``{"example.com": 2}``) override the default;
0 or unset means no limit. AutoThrottle and Scrapy's per-node limits still
apply on top. Nodes' clocks should be NTP-synchronised.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import redis
from scrapy.exceptions import NotConfigured

from extensions import connection, defaults
from extensions.frontier.frontier import load_script
from extensions.frontier.meta import DELAY_UNTIL, RATE_SLOT
from extensions.keys import SpiderKeys

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

ON_TIME_MS = 50  # a slot this close is taken as now: not worth a trip through Redis


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
        self._reserve = server.register_script(load_script("rate"))
        self.health = connection.health_for(crawler)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ClusterPolitenessMiddleware:
        s = crawler.settings
        rate = s.getfloat("CLUSTER_HOST_RATE", defaults.CLUSTER_HOST_RATE)
        host_rates = s.getdict("CLUSTER_HOST_RATES")
        if rate < 0 or any(float(r) < 0 for r in host_rates.values()):
            raise ValueError("CLUSTER_HOST_RATE and CLUSTER_HOST_RATES must not be negative")
        if not rate and not any(float(r) for r in host_rates.values()):
            raise NotConfigured  # off: nothing to do, nothing to say
        assert crawler.spidercls is not None
        server = connection.from_settings(s, ping=False)
        return cls(crawler, server, SpiderKeys.for_crawler(crawler), rate, host_rates)

    def rate_for(self, host: str) -> float:
        return self.host_rates.get(host, self.default_rate)

    def process_request(self, request: Request) -> Request | None:
        parts = urlsplit(request.url)
        host = (parts.hostname or "").lower()
        rate = self.rate_for(host)
        if rate <= 0 or parts.path == "/robots.txt":
            return None
        now = int(time.time() * 1000)
        interval = max(int(1000 / rate), 1)
        reserved = request.meta.pop(RATE_SLOT, None)
        if reserved is not None:
            if now - interval <= reserved <= now + ON_TIME_MS:
                return None  # its reserved time has come
            if reserved > now:  # back too early (clocks apart): wait for the same slot
                return self._park(request, reserved)
            # Picked up too late: its moment passed, and sending it now next to
            # the requests holding the following slots would be a burst.
            self.stats.inc_value("politeness/late")
        key = self.keys.rate(host)
        try:
            slot = int(self._reserve(keys=[key], args=[now, interval]))
        except redis.RedisError as exc:
            # Fail open: a crawl must not stop because Redis is briefly away;
            # Scrapy's own per-node limits still hold meanwhile.
            self.health.failed(exc)
            return None
        self.health.ok()
        if slot <= now + ON_TIME_MS:
            self.stats.inc_value("politeness/sent_at_once")
            return None
        return self._park(request, slot)

    def _park(self, request: Request, slot: int) -> Request:
        parked = request.replace(dont_filter=True)
        parked.meta[RATE_SLOT] = slot
        parked.meta[DELAY_UNTIL] = slot / 1000
        self.stats.inc_value("politeness/parked")
        return parked
