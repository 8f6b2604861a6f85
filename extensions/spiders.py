"""Spiders that take their start URLs from Redis, as scrapy-redis's do.

Make an existing spider distributed by changing its base class::

    class MySpider(DistributedSpider):        # was: scrapy.Spider
        name = "my"

Start URLs come from ``NAME:start_urls`` (``redis-cli LPUSH my:start_urls URL``
or ``scrapy seed my URL``), oldest first, plus the spider's own ``start_urls`` /
``start_requests()`` if it has them. Every start request goes through the shared
dupefilter, so N nodes fetch a start URL once, and a URL pushed twice is
fetched once (push JSON with ``"dont_filter": true`` to force a refetch).

Entries are leased while they are turned into requests (``extensions.frontier.start_urls``):
a node killed meanwhile loses none. An entry that cannot be turned into a
request (invalid, refused by the rules, or an override of
``make_request_from_data`` that raises or returns nothing) is dead-lettered
with the reason, and the spider goes on.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import time
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import redis
from scrapy import Request, Spider, signals
from scrapy.exceptions import DontCloseSpider
from scrapy.spiders import CrawlSpider, SitemapSpider
from twisted.internet import threads

from extensions import connection, defaults
from extensions.cluster.checkpoint import node_id_for
from extensions.exceptions import InvalidStartURL
from extensions.frontier.deadletter import DeadLetters
from extensions.frontier.frontier import Frontier
from extensions.frontier.groups import group_for
from extensions.frontier.meta import START_ENTRY
from extensions.frontier.start_urls import EntryRules, StartLeases, parse_entry, tracker_for
from extensions.frontier.statusstore import MongoStatusStore, store_kind
from extensions.keys import SpiderKeys
from extensions.urlpolicy import mask_credentials

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)


class DistributedMixin:
    """Reads start URLs from Redis; mix in before a Scrapy spider class."""

    #: Overrides ``REDIS_START_URLS_KEY`` for this spider (scrapy-redis's name).
    redis_key: str | None = None
    #: Overrides ``REDIS_START_URLS_BATCH_SIZE`` for this spider.
    redis_batch_size: int | None = None

    name: str
    crawler: Crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any):
        spider = super().from_crawler(crawler, *args, **kwargs)  # type: ignore[misc]
        spider.setup_redis(crawler)
        return spider

    def setup_redis(self, crawler: Crawler) -> None:
        settings = crawler.settings
        self.redis_keys = SpiderKeys.from_settings(self.name, settings, self.redis_key)
        self.redis_key = self.redis_keys.start_urls
        self.redis_batch_size = int(
            self.redis_batch_size
            or settings.getint("REDIS_START_URLS_BATCH_SIZE", defaults.REDIS_START_URLS_BATCH_SIZE)
        )
        if self.redis_batch_size < 1:
            raise ValueError("REDIS_START_URLS_BATCH_SIZE must be at least 1")
        self.server = connection.from_settings(settings)
        node_id = node_id_for(crawler)
        self.dead_letters = DeadLetters(self.server, self.redis_keys.dlq, node_id)
        self.start_leases = StartLeases(self.server, self.redis_keys, node_id)
        self.start_entry_rules = EntryRules.from_settings(settings)
        self.redis_encoding = self.start_entry_rules.encoding  # scrapy-redis's attribute
        crawler.signals.connect(self._read_start_urls_when_idle, signal=signals.spider_idle)
        logger.info("reading start URLs from Redis list %s", self.redis_key)

    async def start(self) -> AsyncIterator[Any]:
        for request in self._own_start_requests():
            yield request
        while True:
            batch = list(self.next_requests())
            if not batch:
                return
            for request in batch:
                yield request

    def _own_start_requests(self) -> Iterable[Any]:
        own = (
            self.start_requests()
            if hasattr(self, "start_requests")
            else (Request(url) for url in getattr(self, "start_urls", ()))
        )
        for output in own or ():
            if isinstance(output, Request) and output.dont_filter:
                output = output.replace(dont_filter=False)
            yield output

    def next_requests(self) -> Iterator[Request]:
        """Requests for the next batch of start URL entries; bad entries are
        logged, counted and dead-lettered, never raised."""
        health = connection.health_for(self.crawler)
        try:
            entries = self.start_leases.take(int(self.redis_batch_size or 1))
        except redis.RedisError as exc:
            health.failed(exc)
            return
        health.ok()
        stats = self.crawler.stats
        tracker = tracker_for(self.crawler)
        for raw in entries:
            try:
                made = self.make_request_from_data(raw)
                requests = [made] if isinstance(made, Request) else list(made or ())
                if not all(isinstance(r, Request) for r in requests):
                    raise InvalidStartURL(
                        "make_request_from_data returned something else than requests"
                    )
            except InvalidStartURL as exc:
                self._refuse_entry(raw, str(exc))
                continue
            # An override of make_request_from_data is the spider's code: whatever
            # it raises costs this entry (dead-lettered), not the spider.
            except Exception as exc:
                self._refuse_entry(
                    raw, f"make_request_from_data raised {type(exc).__name__}: {exc}"
                )
                continue
            if not requests:
                self._refuse_entry(raw, "make_request_from_data made no request")
                continue
            tracker.track(raw, requests, START_ENTRY)
            for request in requests:
                stats.inc_value("start_urls/read")
                yield request

    def _refuse_entry(self, raw: bytes, reason: str) -> None:
        """Dead-letter one start entry and drop its lease, in one transaction."""
        # An entry's credentials stay out of logs and the dead-letter list.
        text = mask_credentials(raw.decode("utf-8", "replace"))
        logger.warning("invalid start URL entry %r: %s", text[:200], reason)
        self.crawler.stats.inc_value("start_urls/invalid")
        pipe = self.server.pipeline(transaction=True)
        self.dead_letters.add(kind="start_url", url=text[:2000], error=reason, pipe=pipe)
        self.start_leases.ack([raw], pipe)
        try:
            pipe.execute()
        except redis.RedisError as exc:
            # The entry stays leased: it goes back to the start list when this
            # node closes or dies, and is judged again then.
            logger.error("could not dead-letter %r: %s", text[:200], exc)

    def make_request_from_data(self, data: bytes) -> Request | Iterable[Request]:
        """Build the request for one start URL entry (scrapy-redis's hook).

        Raise InvalidStartURL for an entry that must be dead-lettered.
        """
        entry = parse_entry(data, self.start_entry_rules)
        if entry.sitemap:
            if not isinstance(self, SitemapSpider):
                raise InvalidStartURL(
                    f"a sitemap entry, but spider {self.name!r} does not read sitemaps "
                    "(base it on DistributedSitemapSpider)"
                )
            return entry.to_request(callback=self._parse_sitemap)
        return entry.to_request()

    def _read_start_urls_when_idle(self) -> None:
        found = False
        for request in self.next_requests():
            self.crawler.engine.crawl(request)
            found = True
        if found:
            raise DontCloseSpider


def reads_start_urls(spidercls: type) -> bool:
    """Whether a spider class takes start URLs from Redis: ours, or scrapy-redis's
    RedisSpider / RedisCrawlSpider left as they are."""
    if issubclass(spidercls, DistributedMixin):
        return True
    try:
        from scrapy_redis.spiders import RedisMixin
    except ImportError:  # scrapy-redis is not installed: only ours then
        return False
    return issubclass(spidercls, RedisMixin)


class DistributedSpider(DistributedMixin, Spider):
    """A ``scrapy.Spider`` fed from Redis."""


class DistributedCrawlSpider(DistributedMixin, CrawlSpider):
    """A ``CrawlSpider`` (rules) fed from Redis."""


class DistributedSitemapSpider(DistributedMixin, SitemapSpider):
    """A ``SitemapSpider`` (``sitemap_urls``, ``sitemap_rules``, ``sitemap_follow``)
    fed from Redis too: entries pushed with ``scrapy seed NAME --sitemap URL`` (a
    sitemap, a sitemap index or a robots.txt) are read as sitemaps, other entries
    as pages. Sitemaps and the URLs they list go through the frontier's
    dupefilter, so every node may start from the same ``sitemap_urls`` and each
    sitemap and page is still fetched once by the whole cluster."""

    #: Trust ``<lastmod>`` for pages kept for a recrawl: one listed as changed since
    #: its last fetch is fetched now, one listed as unchanged has its recrawl put off
    #: by its interval. False for a site whose lastmod dates cannot be trusted.
    sitemap_trust_lastmod = True

    def _own_start_requests(self) -> Iterable[Any]:
        for url in self.sitemap_urls:
            yield Request(url, callback=self._parse_sitemap)
        yield from super()._own_start_requests()

    def _get_urls_and_callbacks_from_urlset(self, entries: Iterable[dict[str, Any]]):
        dated: list[tuple[Any, Any]] = []

        def noting(entries: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
            for entry in entries:
                if entry.get("lastmod") and self.sitemap_trust_lastmod:
                    dated.append((entry.get("loc"), entry["lastmod"]))
                yield entry

        yield from super()._get_urls_and_callbacks_from_urlset(noting(entries))
        if dated:
            self._apply_lastmods(dated)

    def _apply_lastmods(self, dated: list[tuple[Any, Any]]) -> None:
        """Tell the pages kept for a recrawl what the sitemap says of them."""
        stats = self.crawler.stats
        assert stats is not None
        queue_by = self.crawler.settings.get("FRONTIER_QUEUE_BY", defaults.FRONTIER_QUEUE_BY)
        fingerprinter = self.crawler.request_fingerprinter
        entries = []
        latest = time.time() + LASTMOD_SLACK
        for loc, text in dated:
            when = parse_lastmod(text)
            if when is not None and when > latest:
                when = None  # a date to come would make the page "changed" at every read
            try:
                request = Request(loc)
            except (TypeError, ValueError):
                when = None
            if when is None:
                stats.inc_value("recrawl/lastmod_unreadable")
                continue
            fingerprint = fingerprinter.fingerprint(request).hex()
            entries.append((fingerprint, group_for(request.url, None, queue_by), when))
        if not hasattr(self, "_lastmod_target"):
            self._lastmod_target: Any = (
                MongoStatusStore.from_settings(self.crawler.settings, self.name)
                if store_kind(self.crawler.settings) == "mongo"
                else Frontier(self.server, SpiderKeys.for_crawler(self.crawler), "")
            )
        if isinstance(self._lastmod_target, Frontier):
            self._count_lastmods(self._apply_lastmod_batches(entries))
        else:  # MongoDB: off the reactor thread
            applied = threads.deferToThread(self._apply_lastmod_batches, entries)
            applied.addBoth(self._count_lastmods)

    def _apply_lastmod_batches(self, entries: list[tuple[str, str, float]]) -> Any:
        sooner = later = 0
        try:
            for start in range(0, len(entries), LASTMOD_BATCH):
                moved = self._lastmod_target.lastmod(entries[start : start + LASTMOD_BATCH])
                sooner, later = sooner + moved[0], later + moved[1]
        except redis.RedisError as exc:  # MongoDB's errors reach _count_lastmods
            # the pages keep their dates: nothing is lost, the next read tries again
            logger.warning("could not apply a sitemap's lastmod dates: %s", exc)
        return sooner, later

    def _count_lastmods(self, moved: Any) -> None:
        stats = self.crawler.stats
        if isinstance(moved, tuple) and stats is not None:
            stats.inc_value("recrawl/lastmod_changed", moved[0])
            stats.inc_value("recrawl/lastmod_unchanged", moved[1])
        elif not isinstance(moved, tuple):
            message = moved.getErrorMessage() if hasattr(moved, "getErrorMessage") else moved
            logger.warning("could not apply a sitemap's lastmod dates: %s", message)


LASTMOD_BATCH = 1000  # sitemap entries looked up in one round trip
LASTMOD_SLACK = 86400.0  # s: a lastmod later than now by more is unreadable (clocks, zones)


def parse_lastmod(text: Any) -> float | None:
    """A sitemap ``<lastmod>`` (W3C datetime: ``2026-11-30``,
    ``2026-11-30T10:00:00+01:00``, ``...Z``, or just a year and month) in seconds
    since the epoch, UTC when it names no zone; None if it is none of these."""
    if not isinstance(text, str) or len(text) > 64:
        return None
    text = text.strip()
    if re.fullmatch(r"\d{4}(-\d{2})?", text):
        text += "-01-01"[: 10 - len(text)]
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.timestamp()
