"""Fetch pages again on a schedule, cheaply when nothing changed.

A page fetched with a revisit interval (``RECRAWL_AFTER``, ``RECRAWL_RULES``, the
spider's ``recrawl_after``, ``meta["recrawl_after"]``) leaves a revisit record:
the request to fetch again, carrying the page's validators (ETag,
Last-Modified), a fingerprint of its body and its interval in
``meta["recrawl"]``. The scheduler writes it with the release of the page's
lease, so a node dying first loses nothing (the page is fetched again by
another node and recorded then); any node's heartbeat moves due pages back
into the frontier (``NAME:due``, ``NAME:revisit``).

When such a request goes out, it asks ``If-None-Match`` / ``If-Modified-Since``;
a 304 is not parsed (the request is dropped after its record is renewed) and
counted as ``recrawl/not_modified``. Otherwise the body's fingerprint says
whether the page changed (``recrawl/changed``, ``recrawl/unchanged``), and with
``RECRAWL_ADAPTIVE`` an unchanged page's interval grows by half and a changed
page's halves, within ``RECRAWL_MIN`` and ``RECRAWL_MAX``.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
import weakref
from typing import TYPE_CHECKING, Any

from scrapy import Request
from scrapy.exceptions import IgnoreRequest

from extensions import defaults
from extensions.frontier.groups import group_for
from extensions.frontier.meta import RECRAWL, RECRAWL_AFTER
from extensions.frontier.serializer import SerializationError, dumps_request

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)

GROW, SHRINK = 1.5, 0.5  # the adaptive interval's steps (unchanged, changed)


class RecrawlMiddleware:
    def __init__(self, crawler: Crawler):
        s = crawler.settings
        self.crawler = crawler
        self.stats = crawler.stats
        self.after = s.getfloat("RECRAWL_AFTER", defaults.RECRAWL_AFTER)
        self.rules = [
            (re.compile(pattern), float(seconds))
            for pattern, seconds in s.getdict("RECRAWL_RULES", defaults.RECRAWL_RULES).items()
        ]
        self.adaptive = s.getbool("RECRAWL_ADAPTIVE", defaults.RECRAWL_ADAPTIVE)
        self.shortest = s.getfloat("RECRAWL_MIN", defaults.RECRAWL_MIN)
        self.longest = s.getfloat("RECRAWL_MAX", defaults.RECRAWL_MAX)
        self.queue_by = s.get("FRONTIER_QUEUE_BY", defaults.FRONTIER_QUEUE_BY)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RecrawlMiddleware:
        # always on: a single request may ask for a revisit (meta["recrawl_after"]),
        # and a page with no interval costs a meta lookup
        return cls(crawler)

    def process_request(self, request: Request) -> None:
        state = _state_of(request)
        if not state:
            return
        etag, modified = state.get("etag"), state.get("last_modified")
        if isinstance(etag, str) and etag and b"If-None-Match" not in request.headers:
            request.headers[b"If-None-Match"] = etag
        if isinstance(modified, str) and modified and b"If-Modified-Since" not in request.headers:
            request.headers[b"If-Modified-Since"] = modified

    def process_response(self, request: Request, response: Response) -> Any:
        spider: Any = self.crawler.spider
        state = _state_of(request)
        not_modified = response.status == 304 and bool(state)
        if not (200 <= response.status < 300 or not_modified):
            return response
        base = self._interval(request, response, spider)
        if not base:
            return response
        now = time.time()
        if not_modified:
            fingerprint, changed = state.get("fingerprint"), False
            self.stats.inc_value("recrawl/not_modified")
        else:
            fingerprint = hashlib.sha1(response.body).hexdigest()[:16]
            changed = state.get("fingerprint") != fingerprint
            if state:
                self.stats.inc_value("recrawl/changed" if changed else "recrawl/unchanged")
        interval = self._next_interval(base, state, changed)
        changed_at = now if changed else _number(state.get("changed_at")) or now
        etag = response.headers.get(b"ETag") if not not_modified else None
        modified = response.headers.get(b"Last-Modified") if not not_modified else None
        record = {
            "etag": _text(etag) if etag else state.get("etag"),
            "last_modified": _text(modified) if modified else state.get("last_modified"),
            "fingerprint": fingerprint,
            "interval": interval,
            "url": request.url,
            "fetched_at": now,
            "changed_at": changed_at,
        }
        request.meta["recrawl_changed"] = changed
        request.meta["recrawl_changed_at"] = changed_at
        self._leave_record(request, spider, record, now + interval)
        if not_modified:
            raise IgnoreRequest(f"not modified since the last fetch: {request.url}")
        return response

    def _interval(self, request: Request, response: Response, spider: Spider) -> float:
        """The page's revisit interval: meta, then the spider, then the rules, then
        RECRAWL_AFTER; 0 = not again."""
        value = request.meta.get(RECRAWL_AFTER)
        if value is None:
            value = getattr(spider, "recrawl_after", None)
            if callable(value):
                value = value(response)
        if value is None:
            for pattern, seconds in self.rules:
                if pattern.search(request.url):
                    value = seconds
                    break
        if value is None:
            value = self.after
        interval = _number(value)
        return interval if interval and interval > 0 else 0.0

    def _next_interval(self, base: float, state: dict, changed: bool) -> float:
        if not self.adaptive:
            return base
        last = _number(state.get("interval")) or base
        step = SHRINK if changed else GROW
        return min(max(last * step if state else base, self.shortest), self.longest)

    def _leave_record(self, request: Request, spider: Spider, record: dict, due: float) -> None:
        again = request.replace(
            dont_filter=True,
            meta={
                k: v
                for k, v in request.meta.items()
                if not k.startswith("_") and k not in _TRANSIENT
            }
            | {RECRAWL: record},
        )
        for header in (b"If-None-Match", b"If-Modified-Since"):
            again.headers.pop(header, None)
        try:
            data = dumps_request(again, spider)
        except SerializationError as exc:
            logger.warning("%s will not be fetched again: %s", request.url, exc)
            self.stats.inc_value("recrawl/unserializable")
            return
        fingerprint = self.crawler.request_fingerprinter.fingerprint(request).hex()
        group = group_for(request.url, request.meta.get("download_slot"), self.queue_by)
        pending_revisits[request] = (fingerprint, group, due, data)
        self.stats.inc_value("recrawl/scheduled")


# meta Scrapy sets per download: not carried into the next fetch
_TRANSIENT = {"download_latency", "download_slot_key", "redirect_times",
              "redirect_ttl", "redirect_urls", "redirect_reasons", "retry_times",
              "recrawl_changed", "recrawl_changed_at"}  # fmt: skip


# A fetched page's revisit record, for the scheduler to write with the release of
# the page's lease: node-local, by request, so a spider that copies response.meta
# into the requests it makes does not copy it along.
pending_revisits: weakref.WeakKeyDictionary[Request, tuple[str, str, float, bytes]] = (
    weakref.WeakKeyDictionary()
)


def _state_of(request: Request) -> dict:
    """The page's recrawl state, if it is this page's: a spider copying
    response.meta into another page's request copies it too."""
    state = request.meta.get(RECRAWL)
    if isinstance(state, dict) and state.get("url") == request.url:
        return state
    return {}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if value == value and abs(value) != float("inf") else None


def _text(value: bytes) -> str:
    return value.decode("latin-1")
