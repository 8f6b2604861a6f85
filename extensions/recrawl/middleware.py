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
import json
import logging
import re
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from itemadapter import ItemAdapter
from scrapy import Request
from scrapy.exceptions import IgnoreRequest, NotConfigured

from extensions import clock
from extensions.crawlid import crawl_fingerprint, crawl_group
from extensions.frontier.groups import group_for
from extensions.frontier.leased import leased_for
from extensions.frontier.serializer import SerializationError, dumps_request
from extensions.installed import require_addon
from extensions.meta import CRAWL_ID, RECRAWL, RECRAWL_AFTER
from extensions.recrawl.revisits import RevisitEntry, Revisits, ignored_fields, revisits_for

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
        self.after = s.getfloat("RECRAWL_AFTER")
        self.rules = [
            (re.compile(pattern), float(seconds))
            for pattern, seconds in s.getdict("RECRAWL_RULES").items()
        ]
        self.adaptive = s.getbool("RECRAWL_ADAPTIVE")
        self.shortest = s.getfloat("RECRAWL_MIN")
        self.longest = s.getfloat("RECRAWL_MAX")
        self.queue_by = s.get("FRONTIER_QUEUE_BY")
        self.as_leased = leased_for(crawler)
        self.revisits = revisits_for(crawler)
        self.fingerprint_of = s.get("RECRAWL_FINGERPRINT")
        if self.fingerprint_of not in FINGERPRINTS:
            raise ValueError(
                f"RECRAWL_FINGERPRINT must be one of {FINGERPRINTS}, not {self.fingerprint_of!r}"
            )

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RecrawlMiddleware:
        require_addon(crawler.settings, cls.__name__)
        # always on: a single request may ask for a revisit (meta["recrawl_after"]),
        # and a page with no interval costs a meta lookup
        middleware = cls(crawler)
        revisits_for(crawler).failure_hook = middleware.after_failure
        return middleware

    def after_failure(self, request: Request) -> RevisitEntry | None:
        """A page kept for a recrawl whose fetch failed for good (dead-lettered):
        kept as it was, due again after its interval, so an outage of the site
        does not take it off the schedule."""
        state = _state_of(request)
        interval = _number(state.get("interval"))
        if request not in self.as_leased or not interval or interval <= 0:
            return None
        self.stats.inc_value("recrawl/failed")
        spider: Any = self.crawler.spider
        return self._leave_record(request, spider, dict(state), clock.now() + interval)

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
        if request not in self.as_leased:
            return response  # not from the frontier (robots.txt, engine.download): not kept
        spider: Any = self.crawler.spider
        state = _state_of(request)
        not_modified = response.status == 304 and bool(state)
        if not (200 <= response.status < 300 or not_modified):
            if state and response.status in GONE:
                self.stats.inc_value("recrawl/gone")  # not kept: fetched again if linked anew
            return response
        base = self._interval(request, response, spider)
        if not base:
            return response
        now = round(clock.now(), 3)  # a millisecond is fine enough, and shorter JSON
        etag = response.headers.get(b"ETag") if not not_modified else None
        modified = response.headers.get(b"Last-Modified") if not not_modified else None
        record = {"url": request.url, "fetched_at": now}
        for name, value in (("etag", etag), ("last_modified", modified)):
            kept = _text(value) if value else state.get(name)
            if kept:  # absent rather than null: every page's record has them
                record[name] = kept
        if not_modified:
            self.stats.inc_value("recrawl/not_modified")
            self._settle(request, record, state, base, state.get("fingerprint"), counted=False)
            raise IgnoreRequest(f"not modified since the last fetch: {request.url}")
        if getattr(spider, "recrawl_fingerprint", self.fingerprint_of) == "items":
            # settled when the callback's items are known (RecrawlItemsMiddleware),
            # or with what is known when the scheduler is done with the request
            self.revisits.items_digest[request] = hashlib.sha1()
            self.revisits.pending[request] = lambda: self._settle(
                request, record, state, base, self._digest_of(request)
            )
            return response
        self._settle(request, record, state, base, hashlib.sha1(response.body).hexdigest()[:16])
        return response

    def _settle(
        self,
        request: Request,
        record: dict,
        state: dict,
        base: float,
        fingerprint: Any,
        counted: bool = True,
    ) -> RevisitEntry | None:
        """Complete the page's record with its fingerprint and leave it for the
        scheduler; returns it. ``counted``: as changed or unchanged (a 304 is
        counted as not modified instead)."""
        now = record["fetched_at"]
        changed = state.get("fingerprint") != fingerprint  # a first fetch is a change
        if state and counted:
            self.stats.inc_value("recrawl/changed" if changed else "recrawl/unchanged")
        changed_at = now if changed else _number(state.get("changed_at")) or now
        record |= {
            "fingerprint": fingerprint,
            "interval": self._next_interval(base, state, changed),
            "changed_at": changed_at,
        }
        request.meta["recrawl_changed"] = changed
        request.meta["recrawl_changed_at"] = changed_at
        spider: Any = self.crawler.spider
        return self._leave_record(request, spider, record, now + record["interval"])

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

    def _leave_record(
        self, request: Request, spider: Spider, record: dict, due: float
    ) -> RevisitEntry | None:
        # the request as it was leased: what the downloader's middlewares add (user
        # agent, Accept, client hints, cookies, timeouts) is added again next time
        meta_keys = self.as_leased.meta_keys(request)
        again = request.replace(
            dont_filter=True,
            meta={
                k: v
                for k, v in request.meta.items()
                if not k.startswith("_") and k not in _TRANSIENT and k in meta_keys
            }
            | {RECRAWL: record},
        )
        self.as_leased.drop_downloader_headers(request, again)
        for name in _CONDITIONAL:  # this fetch's validators: the record has its own
            again.headers.pop(name, None)
        try:
            data = dumps_request(again, spider)
        except SerializationError as exc:
            logger.warning("%s will not be fetched again: %s", request.url, exc)
            self.stats.inc_value("recrawl/unserializable")
            self.revisits.pending.pop(request, None)
            return None
        crawl = request.meta.get(CRAWL_ID) or ""
        fingerprint = crawl_fingerprint(
            self.crawler.request_fingerprinter.fingerprint(request), crawl
        ).hex()
        slot = again.meta.get("download_slot")  # the spider's own, not the downloader's
        group = crawl_group(group_for(request.url, slot, self.queue_by), crawl)
        entry = (fingerprint, group, due, data)
        self.revisits.pending[request] = entry
        self.stats.inc_value("recrawl/scheduled")
        return entry

    def _digest_of(self, request: Request) -> str:
        digest = self.revisits.items_digest.pop(request, None)
        return digest.hexdigest()[:16] if digest is not None else ""


class RecrawlItemsMiddleware:
    """Where a page's fingerprint is its items' (``RECRAWL_FINGERPRINT = "items"``
    or a spider's ``recrawl_fingerprint = "items"``): hashes the items the
    callback yields, in order, and settles the page's record when it is done, so
    a page whose markup changed but whose items did not counts as unchanged."""

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RecrawlItemsMiddleware:
        require_addon(crawler.settings, cls.__name__)
        setting = crawler.settings.get("RECRAWL_FINGERPRINT")
        if getattr(crawler.spidercls, "recrawl_fingerprint", setting) != "items":
            raise NotConfigured  # pages are told apart by their bodies: nothing to hash
        return cls(revisits_for(crawler), ignored_fields(crawler))

    def __init__(self, revisits: Revisits, ignored: frozenset[str] = frozenset()):
        self.revisits = revisits
        self.ignored = ignored

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any], spider: Any = None
    ) -> AsyncIterator[Any]:
        async for element in result:
            self._hash(response.request, element)
            yield element
        self._done(response.request)

    def process_spider_output(
        self, response: Response, result: Iterable[Any], spider: Any = None
    ) -> Iterator[Any]:
        for element in result:
            self._hash(response.request, element)
            yield element
        self._done(response.request)

    def _hash(self, request: Request | None, element: Any) -> None:
        digest = self.revisits.items_digest.get(request) if request is not None else None
        if digest is None or isinstance(element, Request):
            return
        try:
            fields = ItemAdapter(element).asdict()
        except TypeError:  # not an item
            return
        content = {k: v for k, v in fields.items() if k not in self.ignored}
        digest.update(json.dumps(content, sort_keys=True, default=repr).encode())

    def _done(self, request: Request | None) -> None:
        settle = self.revisits.pending.get(request) if request is not None else None
        if callable(settle):
            settle()


# meta Scrapy sets per download: not carried into the next fetch
_TRANSIENT = {"download_latency", "download_slot_key", "redirect_times",
              "redirect_ttl", "redirect_urls", "redirect_reasons", "retry_times",
              "recrawl_changed", "recrawl_changed_at"}  # fmt: skip


FINGERPRINTS = ("body", "items")
GONE = (404, 410)  # a kept page answering these is dropped from the schedule
_CONDITIONAL = {b"If-None-Match", b"If-Modified-Since"}


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
