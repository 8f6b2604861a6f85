"""Proxy rotation: scrapy-rotating-proxies, in step with current Scrapy and
shared across the cluster.

What this adds to the package's ``RotatingProxyMiddleware`` and
``BanDetectionMiddleware``:

* proxies from ``ROTATING_PROXY_LIST``, a file (``ROTATING_PROXY_LIST_PATH``)
  or the ``PROXIES`` environment variable (comma, space or newline separated),
  with or without ``user:pass@``; none configured = the middleware is off;
* proxy health shared through Redis (``NAME:proxies``): a proxy one node found
  dead rests on every node until its backoff ends;
* when every proxy rests, the node says so once and parks requests in Redis
  until the first proxy wakes up, instead of hammering dead proxies;
* ban detection by status (``PROXY_BAN_STATUSES``) and body markers
  (``PROXY_BAN_MARKERS``, e.g. ``captcha``); a spider's ``response_is_ban`` /
  ``exception_is_ban`` methods override it;
* Scrapy 2.13+ signatures (no ``spider`` argument) and no credentials in logs,
  stats or Redis: proxies are named by host:port there.
"""

from __future__ import annotations

import logging
import math
import os
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import redis
from rotating_proxies.expire import Proxies
from rotating_proxies.middlewares import BanDetectionMiddleware as StockBanDetection
from rotating_proxies.middlewares import RotatingProxyMiddleware as StockRotatingProxies
from rotating_proxies.policy import BanDetectionPolicy
from scrapy import signals
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.utils.misc import load_object

from extensions import clock, connection
from extensions.installed import require_addon
from extensions.keys import SpiderKeys
from extensions.meta import DELAY_UNTIL

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)


def proxy_label(proxy: str) -> str:
    """host:port of a proxy URL: how it is named anywhere a person may read it."""
    parts = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    return f"{parts.hostname}:{parts.port or 80}"


def proxy_list(settings, environ: Mapping[str, str] | None = None) -> list[str]:
    """Proxies from ROTATING_PROXY_LIST, else ROTATING_PROXY_LIST_PATH, else $PROXIES."""
    env: Mapping[str, str] = os.environ if environ is None else environ
    listed = settings.getlist("ROTATING_PROXY_LIST")
    if not listed and settings.get("ROTATING_PROXY_LIST_PATH"):
        path = Path(settings.get("ROTATING_PROXY_LIST_PATH"))
        try:
            listed = path.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise ValueError(f"ROTATING_PROXY_LIST_PATH {path}: {exc.strerror}") from None
    if not listed and env.get("PROXIES"):
        listed = re.split(r"[\s,]+", env["PROXIES"])
    return [p.strip() for p in listed if p.strip() and not p.strip().startswith("#")]


def proxy_record(until: Any, attempts: Any) -> str | None:
    """The shared record of a resting proxy: "rest until:failed attempts"."""
    if not isinstance(until, (int, float)) or not math.isfinite(until):
        return None
    if not isinstance(attempts, int) or attempts < 0:
        return None
    return f"{until}:{attempts}"


def parse_proxy_record(value: bytes | str) -> tuple[float, int] | None:
    """(rest until, failed attempts) from a shared record, None if malformed:
    the record may come from any node, or anyone who can write to Redis."""
    try:
        text = value.decode("ascii") if isinstance(value, bytes) else value
        until_text, sep, attempts_text = text.partition(":")
        until, attempts = float(until_text), int(attempts_text or 0)
    except (UnicodeDecodeError, ValueError):
        return None
    if not sep or not math.isfinite(until) or attempts < 0:
        return None
    return until, min(attempts, 64)


class MaskedProxies(Proxies):
    """The package's proxy pool, logging host:port instead of full proxy URLs."""

    def mark_dead(self, proxy: str, _time: float | None = None) -> None:
        if proxy not in self.proxies:
            return
        logger.debug("proxy %s is resting", proxy_label(proxy))
        state = self.proxies[proxy]
        self.unchecked.discard(proxy)
        self.good.discard(proxy)
        self.dead.add(proxy)
        now = _time or clock.now()
        state.backoff_time = self.backoff(state.failed_attempts)
        state.next_check = now + state.backoff_time
        state.failed_attempts += 1

    def mark_good(self, proxy: str) -> None:
        if proxy not in self.proxies:
            return
        self.unchecked.discard(proxy)
        self.dead.discard(proxy)
        self.good.add(proxy)
        self.proxies[proxy].failed_attempts = 0

    def rest_until(self, proxy: str, until: float, failed_attempts: int) -> None:
        """Rest a proxy another node found dead, until that node's backoff ends."""
        state = self.proxies[proxy]
        if proxy in self.dead and (state.next_check or 0) >= until:
            return
        self.unchecked.discard(proxy)
        self.good.discard(proxy)
        self.dead.add(proxy)
        state.next_check = until
        state.backoff_time = max(until - clock.now(), 0)
        state.failed_attempts = max(state.failed_attempts, failed_attempts)

    def first_wake(self) -> float | None:
        times = [self.proxies[p].next_check for p in self.dead if self.proxies[p].next_check]
        return min(times) if times else None


class RotatingProxyMiddleware(StockRotatingProxies):
    SYNC_INTERVAL = 1.0  # seconds between reads of the cluster's proxy health
    proxies: MaskedProxies

    def __init__(self, *args: Any, server: redis.Redis | None = None, key: str = "", **kwargs):
        super().__init__(*args, **kwargs)
        self.proxies = MaskedProxies(list(self.proxies.proxies), backoff=self.proxies.backoff)
        self.by_label = {proxy_label(p): p for p in self.proxies.proxies}
        self.server = server
        self.key = key
        self._synced = 0.0
        self._all_resting_said = False
        self._bad_records_said: set[bytes | str] = set()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RotatingProxyMiddleware:
        require_addon(crawler.settings, cls.__name__)
        s = crawler.settings
        proxies = proxy_list(s)
        if not proxies:
            raise NotConfigured  # no proxies configured: off, silently
        assert crawler.spidercls is not None
        middleware = cls(
            proxy_list=proxies,
            logstats_interval=s.getfloat("ROTATING_PROXY_LOGSTATS_INTERVAL", 30),
            stop_if_no_proxies=s.getbool("ROTATING_PROXY_CLOSE_SPIDER", False),
            max_proxies_to_try=s.getint("ROTATING_PROXY_PAGE_RETRY_TIMES", 5),
            backoff_base=s.getfloat("ROTATING_PROXY_BACKOFF_BASE", 300),
            backoff_cap=s.getfloat("ROTATING_PROXY_BACKOFF_CAP", 3600),
            crawler=crawler,
            server=connection.client_for(crawler),
            key=SpiderKeys.for_crawler(crawler).proxies,
        )
        middleware.crawler = crawler
        crawler.signals.connect(middleware.engine_started, signal=signals.engine_started)
        crawler.signals.connect(middleware.engine_stopped, signal=signals.engine_stopped)
        logger.info("rotating through %d proxies", len(middleware.by_label))
        return middleware

    # Scrapy 2.13+ calls these without a spider argument.

    def process_request(self, request: Request, spider: Any = None) -> Request | None:
        if "proxy" in request.meta and not request.meta.get("_rotating_proxy"):
            return None  # the request chose its own proxy
        self._sync()
        proxy = self.proxies.get_random()
        if proxy is None:
            return self._park(request)
        request.meta["proxy"] = proxy
        request.meta["download_slot"] = self.get_proxy_slot(proxy)
        request.meta["_rotating_proxy"] = True
        return None

    def process_response(self, request: Request, response: Response, spider: Any = None):
        return self._handle(request) or response

    def process_exception(self, request: Request, exception: Exception, spider: Any = None):
        return self._handle(request)

    def _handle(self, request: Request) -> Request | None:
        proxy = self.proxies.get_proxy(request.meta.get("proxy"))
        was_dead = proxy in self.proxies.dead if proxy else False
        retry = self._handle_result(request, self.crawler.spider)
        if proxy and request.meta.get("_ban") is True and not was_dead:
            self.crawler.stats.inc_value("proxies/banned")
            self._publish(proxy)
        return retry

    def _park(self, request: Request) -> Request:
        """Every proxy rests: wait in Redis for the first to wake, not in a loop."""
        wake = self.proxies.first_wake() or clock.now() + 5
        # Said once per node at WARNING; later episodes are counted in the stats.
        logger.log(
            logging.DEBUG if self._all_resting_said else logging.WARNING,
            "all %d proxies are resting; requests wait in Redis until %s",
            len(self.by_label),
            time.strftime("%H:%M:%S", time.localtime(wake)),
        )
        self._all_resting_said = True
        self.crawler.stats.inc_value("proxies/all_resting_waits")
        parked = request.replace(dont_filter=True)
        parked.meta[DELAY_UNTIL] = max(wake, clock.now() + 1)
        return parked

    def _publish(self, proxy: str) -> None:
        if self.server is None:
            return
        state = self.proxies.proxies[proxy]
        record = proxy_record(state.next_check, state.failed_attempts)
        if record is None:
            return  # not resting (e.g. never marked dead): nothing the others could use
        try:
            self.server.hset(self.key, proxy_label(proxy), record)
        except redis.RedisError as exc:
            connection.health_for(self.crawler).failed(exc)

    def _sync(self) -> None:
        now = clock.now()
        if self.server is None or now - self._synced < self.SYNC_INTERVAL:
            return
        self._synced = now
        try:
            shared = self.server.hgetall(self.key)
        except redis.RedisError as exc:
            connection.health_for(self.crawler).failed(exc)
            return
        for label, value in shared.items():
            proxy = self.by_label.get(connection.text(label))
            if proxy is None:
                continue
            parsed = parse_proxy_record(value)
            if parsed is None:
                if label not in self._bad_records_said:
                    self._bad_records_said.add(label)
                    logger.warning(
                        "ignoring malformed proxy record %r in %s", value[:100], self.key
                    )
                    self.crawler.stats.inc_value("proxies/bad_records")
                continue
            until, attempts = parsed
            if until > now:
                self.proxies.rest_until(proxy, until, attempts)

    def log_stats(self) -> None:
        logger.info("%s", self.proxies)


class BanPolicy(BanDetectionPolicy):
    """A ban is a status in PROXY_BAN_STATUSES, an empty 200, a body holding one of
    PROXY_BAN_MARKERS, or a download error other than IgnoreRequest."""

    def __init__(self, statuses: set[int], markers: list[bytes]):
        self.statuses = statuses
        self.markers = markers

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> BanPolicy:
        require_addon(crawler.settings, cls.__name__)
        s = crawler.settings
        statuses = {int(x) for x in s.getlist("PROXY_BAN_STATUSES")}
        markers = [m.lower().encode() for m in s.getlist("PROXY_BAN_MARKERS")]
        return cls(statuses, markers)

    def response_is_ban(self, request: Request, response: Response) -> bool:
        if response.status in self.statuses:
            return True
        if response.status == 200 and not response.body:
            return True
        if self.markers and response.status == 200:
            body = response.body[:200_000].lower()
            return any(marker in body for marker in self.markers)
        return False

    def exception_is_ban(self, request: Request, exception: Exception) -> bool:
        return not isinstance(exception, IgnoreRequest)


class BanDetectionMiddleware(StockBanDetection):
    def __init__(self, crawler: Crawler, policy: Any):
        super().__init__(crawler.stats, policy)
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> BanDetectionMiddleware:
        require_addon(crawler.settings, cls.__name__)
        if not proxy_list(crawler.settings):
            raise NotConfigured  # no proxies configured: off, silently
        policy_cls = load_object(
            crawler.settings.get("ROTATING_PROXY_BAN_POLICY")
            or "extensions.downloadermiddlewares.proxies.BanPolicy"
        )
        policy = (
            policy_cls.from_crawler(crawler)
            if hasattr(policy_cls, "from_crawler")
            else policy_cls()
        )
        return cls(crawler, policy)

    def process_response(self, request: Request, response: Response, spider: Any = None):
        return super().process_response(request, response, self.crawler.spider)

    def process_exception(self, request: Request, exception: Exception, spider: Any = None):
        return super().process_exception(request, exception, self.crawler.spider)
