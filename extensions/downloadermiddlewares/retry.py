"""Retries that wait in Redis, with exponential backoff and full jitter.

Scrapy's ``RetryMiddleware`` decides *whether* to retry (``RETRY_TIMES``,
``RETRY_HTTP_CODES``, ``RETRY_EXCEPTIONS``, ``dont_retry``, ``max_retry_times``);
this subclass decides *when*: attempt n waits ``uniform(0, min(cap, base * 2**(n-1)))``
seconds, and at least the server's ``Retry-After`` on 429 and 503 (up to
``RETRY_AFTER_MAX``). The wait is not spent in the reactor: the retry is
written to ``NAME:delayed`` and any node takes it once it is due, so it holds no
download slot and survives restarts. A request out of retries goes to the
dead-letter queue with what a person needs to judge and replay it.

Per request, ``meta`` can override ``retry_backoff_base`` and ``retry_backoff_max``
(and, as in Scrapy, ``max_retry_times`` and ``dont_retry``).
"""

from __future__ import annotations

import email.utils
import logging
import random
import re
from typing import TYPE_CHECKING, Any

import redis
from scrapy.downloadermiddlewares.retry import RetryMiddleware, get_retry_request
from scrapy.exceptions import CannotResolveHostError, DownloadCancelledError, IgnoreRequest
from scrapy.utils.httpobj import urlparse_cached
from scrapy.utils.response import response_status_message
from twisted.internet.defer import CancelledError
from twisted.internet.error import DNSLookupError

from extensions import clock, connection
from extensions.cluster.checkpoint import node_id_for
from extensions.dns.resolver import failure_reason
from extensions.frontier.deadletter import DeadLetters
from extensions.frontier.leased import leased_for
from extensions.installed import require_addon
from extensions.keys import SpiderKeys
from extensions.meta import DEAD_LETTERED, DELAY_UNTIL, FIRST_FAILURE, PAYMENT_REFUSED
from extensions.wire.failures import tls_failure

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.settings import BaseSettings

logger = logging.getLogger(__name__)

RETRY_AFTER_STATUSES = (429, 503)


def parse_retry_after(value: bytes | str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After header (delta seconds or HTTP date)."""
    if not value:
        return None
    text = value.decode("latin-1") if isinstance(value, bytes) else value
    text = text.strip()
    if text.isdigit():
        return float(text)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - (now if now is not None else clock.now()), 0.0)


_RANDOM = random.Random()


def backoff_delay(attempt: int, base: float, cap: float, rng: random.Random | None = None) -> float:
    """Full jitter: uniform between 0 and the capped exponential for this attempt."""
    return (rng or _RANDOM).uniform(0, min(cap, base * 2 ** max(attempt - 1, 0)))


# what a 402's headers may say of its price: pay-per-crawl's crawler-price, x402's
# payment headers, an authentication scheme, a link to the terms
PAYMENT_HEADERS = re.compile(r"price|pay|charge|cost|402|www-authenticate|^link$", re.I)
PAYMENT_HEADERS_KEPT, PAYMENT_VALUE_KEPT = 8, 300


def payment_terms(headers: Any) -> str:
    """The headers of a 402 answer that may name its price, as ``name: value; ...``."""
    kept: list[str] = []
    for name, values in headers.items():
        text = name.decode("latin-1")
        if PAYMENT_HEADERS.search(text) and len(kept) < PAYMENT_HEADERS_KEPT:
            value = b", ".join(values).decode("latin-1")[:PAYMENT_VALUE_KEPT]
            kept.append(f"{text}: {value}")
    return "; ".join(kept)


def _is_robots_request(request: Request) -> bool:
    return bool(request.meta.get("dont_obey_robotstxt")) and request.url.endswith("/robots.txt")


def _failure_text(request: Request, exception: Exception, maxsize: int) -> str:
    if isinstance(exception, (CancelledError, DownloadCancelledError)):
        # Scrapy cancels a download that outgrew its size cap, and says so only in a log line.
        cap = request.meta.get("download_maxsize", maxsize)
        return f"download cancelled: response larger than DOWNLOAD_MAXSIZE ({cap} bytes)"
    return f"{type(exception).__name__}: {exception}"


class BackoffRetryMiddleware(RetryMiddleware):
    def __init__(
        self,
        settings: BaseSettings,
        dead_letters: DeadLetters | None = None,
    ):
        super().__init__(settings)
        self.backoff_base = settings.getfloat("RETRY_BACKOFF_BASE")
        self.backoff_max = settings.getfloat("RETRY_BACKOFF_MAX")
        self.retry_after_max = settings.getfloat("RETRY_AFTER_MAX")
        if self.backoff_base < 0 or self.backoff_max < 0 or self.retry_after_max < 0:
            raise ValueError(
                "RETRY_BACKOFF_BASE, RETRY_BACKOFF_MAX and RETRY_AFTER_MAX must be >= 0"
            )
        self.dead_letters = dead_letters
        self.maxsize = settings.getint("DOWNLOAD_MAXSIZE")

    payment_key = ""  # NAME:payment_required

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> BackoffRetryMiddleware:
        require_addon(crawler.settings, cls.__name__)
        assert crawler.spidercls is not None
        keys = SpiderKeys.for_crawler(crawler)
        server = connection.client_for(crawler)
        middleware = cls(crawler.settings, DeadLetters(server, keys.dlq, node_id_for(crawler)))
        middleware.crawler = crawler
        middleware.payment_key = keys.payment_required
        return middleware

    def process_response(
        self, request: Request, response: Response, spider: Spider | None = None
    ) -> Request | Response:
        if response.status == 402 and not _is_robots_request(request):
            self._payment_required(request, response)
            return response
        if request.meta.get("dont_retry", False) or response.status not in self.retry_http_codes:
            return response
        if _is_robots_request(request):
            return response  # a robots.txt that failed: the robots.txt middleware waits
        retry_after = None
        if response.status in RETRY_AFTER_STATUSES:
            retry_after = parse_retry_after(response.headers.get("Retry-After"))
        retry = self._retry_later(
            request,
            reason=response_status_message(response.status),
            error=f"HTTP {response.status}",
            retry_after=retry_after,
            status=response.status,
        )
        return retry or response

    def process_exception(
        self, request: Request, exception: Exception, spider: Spider | None = None
    ) -> Request | None:
        if isinstance(exception, IgnoreRequest) or request.meta.get(DEAD_LETTERED):
            return None  # dropped on purpose (robots.txt, URL policy), not failed
        refused = tls_failure(exception)
        if refused is not None:
            # the same certificate again on any retry (robots.txt's too): nothing to wait for
            now = clock.now()
            first = request.meta.get(FIRST_FAILURE, now)
            self._dead_letter(request, f"tls_error: {refused}", None, first, now, kind="tls_error")
            retry = None
        elif isinstance(exception, self.exceptions_to_retry) and not request.meta.get(
            "dont_retry", False
        ):
            retry = self._retry_later(
                request,
                reason=exception,
                error=f"{type(exception).__name__}: {self._dns_reason(request, exception)}",
            )
        elif _is_robots_request(request):
            return None  # Scrapy's robots.txt middleware handles its own failures
        else:
            # Nothing will try this request again: it failed for good.
            now = clock.now()
            error = _failure_text(request, exception, self.maxsize)
            self._dead_letter(
                request, error, None, request.meta.get(FIRST_FAILURE, now), now, kind="failed"
            )
            retry = None
        if retry is None and request.meta.get(DEAD_LETTERED) and request.errback is None:
            # Said once, with the reason, and kept in the dead-letter list: no
            # traceback for an outcome the crawl planned for.
            raise IgnoreRequest(f"dead-lettered: {exception!r}")
        return retry

    def _payment_required(self, request: Request, response: Response) -> None:
        """A page a site wants paid for: never retried, dead-lettered with the
        terms its headers name, counted for its host; its host is not slowed."""
        now = clock.now()
        terms = payment_terms(response.headers)
        error = "HTTP 402 Payment Required" + (f" ({terms})" if terms else "")
        refused = request.meta.pop(PAYMENT_REFUSED, None)
        if refused:  # PAY_PER_CRAWL_MAX_PRICE is set: why this one was not paid for
            error += f"; not paid: {refused}"
        self._dead_letter(request, error, 402, request.meta.get(FIRST_FAILURE, now), now,
                          kind="payment_required")  # fmt: skip
        if self.dead_letters is not None:
            host = (urlparse_cached(request).hostname or "").lower()[:253]
            try:
                self.dead_letters.server.hincrby(self.payment_key, host, 1)
            except redis.RedisError as exc:
                connection.health_for(self.crawler).failed(exc)

    def _dns_reason(self, request: Request, exception: Exception) -> str:
        """The exception's text; for a failed lookup with DNS_SHARED, what the DNS
        said of the host, which Twisted's "no results" hides (NXDOMAIN, SERVFAIL)."""
        if isinstance(exception, (DNSLookupError, CannotResolveHostError)):
            host = (urlparse_cached(request).hostname or "").lower()
            return failure_reason(self.crawler, host) or str(exception)
        return str(exception)

    def _retry_later(
        self,
        request: Request,
        *,
        reason: str | Exception,
        error: str,
        retry_after: float | None = None,
        status: int | None = None,
    ) -> Request | None:
        now = clock.now()
        first_failure = request.meta.get(FIRST_FAILURE, now)
        meta = request.meta
        assert self.crawler.spider is not None  # retries happen while it runs
        retry = get_retry_request(
            request,
            spider=self.crawler.spider,
            reason=reason,
            max_retry_times=meta.get("max_retry_times", self.max_retry_times),
            priority_adjust=meta.get("priority_adjust", self.priority_adjust),
            give_up_log_level=meta.get("give_up_log_level", self.give_up_log_level),
        )
        if retry is None:
            self._dead_letter(request, error, status, first_failure, now)
            return None
        attempt = retry.meta["retry_times"]
        delay = backoff_delay(
            attempt,
            request.meta.get("retry_backoff_base", self.backoff_base),
            request.meta.get("retry_backoff_max", self.backoff_max),
        )
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.retry_after_max))
            self.crawler.stats.inc_value("retry/retry_after_honored")
        retry.meta[FIRST_FAILURE] = first_failure
        retry.meta[DELAY_UNTIL] = now + delay
        leased_for(self.crawler).drop_downloader_headers(request, retry)  # parked till due
        self.crawler.stats.inc_value("retry/delayed")
        logger.debug("retry %d of %s in %.2fs (%s)", attempt, request.url, delay, error)
        return retry

    def _dead_letter(
        self,
        request: Request,
        error: str,
        status: int | None,
        first: float,
        last: float,
        kind: str = "retries_exhausted",
    ) -> None:
        self.crawler.stats.inc_value(
            "retry/dead_lettered" if kind == "retries_exhausted" else f"failed/{kind}"
        )
        if self.dead_letters is None:
            return
        try:
            self.dead_letters.add_request(
                self.crawler, request, kind=kind, error=error, status=status, first=first, last=last
            )
        except redis.RedisError as exc:
            connection.health_for(self.crawler).failed(exc)
            logger.error("could not dead-letter %s (%s): %s", request.url, error, exc)
