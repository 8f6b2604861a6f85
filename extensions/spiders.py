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

import logging
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import TYPE_CHECKING, Any, ClassVar

import redis
from scrapy import Request, Spider, signals
from scrapy.exceptions import DontCloseSpider
from scrapy.http import HtmlResponse
from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, SitemapSpider
from twisted.internet import task

from extensions import connection, engine
from extensions.cluster.checkpoint import node_id_for
from extensions.exceptions import InvalidStartURL
from extensions.follow import follower_for
from extensions.frontier.deadletter import DeadLetters
from extensions.frontier.start_urls import EntryRules, StartLeases, parse_entry, tracker_for
from extensions.installed import with_defaults
from extensions.keys import SpiderKeys
from extensions.meta import START_ENTRY
from extensions.sitemaps import SitemapReading
from extensions.urlpolicy import mask_credentials

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response, TextResponse
    from scrapy.link import Link

logger = logging.getLogger(__name__)


class DistributedMixin(SitemapReading):
    """Reads start URLs from Redis, and sitemaps; mix in before a Scrapy spider class."""

    #: the frontier reads it: this spider takes start URLs from Redis
    reads_start_urls_from_redis: ClassVar[bool] = True
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
        # Scrapy builds the spider before the add-ons install their settings
        settings = with_defaults(crawler.settings)
        self.redis_keys = SpiderKeys.from_settings(self.name, settings, self.redis_key)
        self.redis_key = self.redis_keys.start_urls
        self.redis_batch_size = int(
            self.redis_batch_size or settings.getint("REDIS_START_URLS_BATCH_SIZE")
        )
        if self.redis_batch_size < 1:
            raise ValueError("REDIS_START_URLS_BATCH_SIZE must be at least 1")
        self.server = connection.client_for(crawler, ping=True)
        node_id = node_id_for(crawler)
        self.dead_letters = DeadLetters(self.server, self.redis_keys.dlq, node_id)
        self.start_leases = StartLeases(self.server, self.redis_keys, node_id)
        self.start_entry_rules = EntryRules.from_settings(settings)
        self.redis_encoding = self.start_entry_rules.encoding  # scrapy-redis's attribute
        crawler.signals.connect(self._read_start_urls_when_idle, signal=signals.spider_idle)
        # a busy node is never idle: it looks at the start list on a timer too, so a
        # crawl seeded beside a running one starts at once, not when this one ends
        self._start_poll = task.LoopingCall(self._read_start_urls_while_busy)
        self._start_poll_interval = settings.getfloat("REDIS_START_URLS_POLL")
        crawler.signals.connect(self._poll_start_urls, signal=signals.spider_opened)
        crawler.signals.connect(self._stop_polling_start_urls, signal=signals.spider_closed)
        self.setup_sitemaps(crawler, settings)
        logger.info("reading start URLs from Redis list %s at %s", self.redis_key,
                    connection.mask_url(connection.redis_url(settings)))  # fmt: skip

    async def start(self) -> AsyncIterator[Any]:
        for request in self.sitemap_requests():
            yield request
        for request in self._own_start_requests():
            yield request
        while True:
            batch = list(self.next_requests())
            if not batch:
                return
            for request in batch:
                yield request

    def new_links(
        self, response: TextResponse, extractor: LinkExtractor | None = None
    ) -> list[Link]:
        """The links ``extractor`` (by default every ``<a href>`` and ``<area
        href>``) finds on ``response``, less those this node already sent to the
        frontier for the page's crawl: Scrapy's ``Link`` objects, in page order
        (``extensions/follow.py``)."""
        if extractor is None:
            extractor = self.__dict__.setdefault("_every_link", LinkExtractor())
        return follower_for(self, extractor).new_links(response)

    def follow_links(
        self, response: TextResponse, extractor: LinkExtractor | None = None, **kwargs: Any
    ) -> Iterator[Request]:
        """``response.follow(link, **kwargs)`` for each of ``new_links``: the link
        path at a cost per new link (callback, meta, priority and the rest as
        ``response.follow`` takes them)."""
        for link in self.new_links(response, extractor):
            yield response.follow(link, **kwargs)

    def document(self, response: Response) -> dict[str, Any] | None:
        """``response``'s document for search and language models: its main
        content as markdown and text, title, description, language, dates,
        JSON-LD, a token estimate and, with ``DOCUMENTS_CHUNK_SIZE``, chunks
        (``extensions/documents/``); None for a page that makes none, counted
        with the reason (``documents/skipped/...``)."""
        from extensions.documents.builder import Documents

        return Documents.from_crawler(self.crawler).of(response)

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
            return entry.to_request(callback=self._parse_sitemap)
        return entry.to_request()

    def _read_start_urls_when_idle(self) -> None:
        if self._read_start_urls():
            raise DontCloseSpider

    def _read_start_urls(self) -> bool:
        """Hand the next batch of start entries to the engine; whether there were any."""
        found = False
        for request in self.next_requests():
            self.crawler.engine.crawl(request)
            found = True
        return found

    def _read_start_urls_while_busy(self) -> None:
        # not into an engine closing its spider: its scheduler may be closed
        # already, and what it took would wait in its start leases until reclaimed
        if not engine.is_closing(self.crawler):
            self._read_start_urls()

    def _poll_start_urls(self) -> None:
        if not self._start_poll.running:
            self._start_poll.start(self._start_poll_interval, now=False)

    def _stop_polling_start_urls(self) -> None:
        if self._start_poll.running:
            self._start_poll.stop()


class DistributedSpider(DistributedMixin, Spider):
    """A ``scrapy.Spider`` fed from Redis."""


class DistributedCrawlSpider(DistributedMixin, CrawlSpider):
    """A ``CrawlSpider`` (rules) fed from Redis. Its rules take their links through
    the link path (``new_links``): a link this node already sent is not handed to
    ``process_links`` or built into a request again."""

    def _requests_to_follow(self, response: Response) -> Iterable[Request | None]:
        if not isinstance(response, HtmlResponse):
            return
        seen: set[Link] = set()
        for rule_index, rule in enumerate(self._rules):
            links = [link for link in self.new_links(response, rule.link_extractor)
                     if link not in seen]  # fmt: skip
            process_links: Any = rule.process_links  # a name, resolved by CrawlSpider
            process_request: Any = rule.process_request
            for link in process_links(links):
                seen.add(link)
                request = self._build_request(rule_index, link)
                yield process_request(request, response)


class DistributedSitemapSpider(DistributedMixin, SitemapSpider):
    """Scrapy's ``SitemapSpider`` fed from Redis: ``sitemap_rules`` default to
    ``parse`` for every page, as in Scrapy. Every distributed spider reads
    sitemaps (``extensions.sitemaps``); this one is for spiders written for
    Scrapy's class."""
