"""Sitemaps for every distributed spider.

Any ``DistributedSpider`` reads the sitemaps it is given: its ``sitemap_urls``,
entries pushed with ``scrapy seed NAME --sitemap URL``, and, with
``SITEMAP_FROM_ROBOTS``, the ``Sitemap:`` lines of the robots.txt of each host
it queues a request for. Reading is Scrapy's ``SitemapSpider``'s own (its
parsing, size limits, ``sitemap_follow``, ``sitemap_alternate_links``,
``sitemap_filter``); a page a sitemap lists goes to the spider's
``sitemap_rules`` where it has them, else to its usual callback (``parse``, or a
``CrawlSpider``'s rules). Sitemaps and the pages they list go through the
frontier's dupefilter like any request, so each is fetched once by the cluster.

A ``<lastmod>`` steers the recrawl of a page kept for one: listed as changed
since its last fetch, it is fetched now; listed as unchanged, its recrawl is
put off by its interval.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import redis
from scrapy import Request, signals
from scrapy.http import Response
from scrapy.spiders import SitemapSpider
from scrapy.spiders.sitemap import regex
from scrapy.utils.httpobj import urlparse_cached
from scrapy.utils.sitemap import sitemap_urls_from_robots
from twisted.internet import threads

from extensions import clock
from extensions.frontier.frontier import Frontier
from extensions.frontier.groups import group_for
from extensions.keys import SpiderKeys
from extensions.recrawl.lastmod import LASTMOD_SLACK, apply_lastmods, parse_lastmod
from extensions.recrawl.redisstore import RecrawlStore
from extensions.recrawl.statusstore import MongoStatusStore, store_kind

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings

logger = logging.getLogger(__name__)

HOSTS_REMEMBERED = 100_000  # hosts whose robots.txt a node queued; then it starts over


class SitemapReading:
    """Scrapy's sitemap reading, mixed into every distributed spider."""

    sitemap_urls: Sequence[str] = ()
    sitemap_follow: Sequence[re.Pattern[str] | str] = [""]
    sitemap_alternate_links: bool = False
    #: Trust ``<lastmod>`` for pages kept for a recrawl. False for a site whose
    #: lastmod dates cannot be trusted.
    sitemap_trust_lastmod = True

    crawler: Crawler
    server: redis.Redis
    #: private methods a queued request may name as its callback (the serializer reads it)
    private_callbacks: ClassVar[frozenset[str]] = frozenset({"_parse_sitemap"})

    # Scrapy's SitemapSpider methods, shared rather than copied: they need only
    # the attributes setup_sitemaps gives a spider that is not a SitemapSpider.
    sitemap_filter = SitemapSpider.sitemap_filter
    _get_sitemap_body = SitemapSpider._get_sitemap_body

    def setup_sitemaps(self, crawler: Crawler, settings: BaseSettings) -> None:
        """``settings``: the crawler's, with the stack's defaults (the add-on has
        not installed them yet when a spider is built)."""
        if not isinstance(self, SitemapSpider):  # which set these up in its own __init__
            rules = getattr(self, "sitemap_rules", None)
            # without rules, Request's own default callback: parse, or a CrawlSpider's rules
            self._cbs: list[tuple[re.Pattern[str], Any]] = (
                [(regex(r), getattr(self, c) if isinstance(c, str) else c) for r, c in rules]
                if rules
                else [(regex(""), None)]
            )
            self._follow = [regex(x) for x in self.sitemap_follow]
            self._max_size = getattr(self, "download_maxsize", settings.getint("DOWNLOAD_MAXSIZE"))
            self._warn_size = getattr(
                self, "download_warnsize", settings.getint("DOWNLOAD_WARNSIZE")
            )
        if settings.getbool("SITEMAP_FROM_ROBOTS"):
            self._robots_queued: set[str] = set()
            crawler.signals.connect(self._queue_robots_sitemaps, signal=signals.request_scheduled)

    def _parse_sitemap(self, response: Response) -> Iterable[Request]:
        """A sitemap's, a sitemap index's or a robots.txt's requests (the callback
        of every sitemap request)."""
        if response.url.endswith("/robots.txt"):
            urls = sitemap_urls_from_robots(response.body, base_url=response.url)
            return [Request(url, callback=self._parse_sitemap) for url in self._usable(urls)]
        return SitemapSpider._parse_sitemap(self, response)  # type: ignore[arg-type]

    def _usable(self, urls: Iterable[Any]) -> Iterator[str]:
        """The URLs a request can be made of: one bad ``<loc>`` of a sitemap (anyone
        writes them) is counted and skipped, not the end of the sitemap's pages."""
        for url in urls:
            try:
                Request(url)
            except (TypeError, ValueError):
                self.crawler.stats.inc_value("sitemaps/bad_loc")
                continue
            yield url

    def _get_urls_from_sitemapindex(self, entries: Iterable[dict[str, Any]]) -> Iterator[str]:
        found = SitemapSpider._get_urls_from_sitemapindex(self, entries)  # type: ignore[arg-type]
        yield from self._usable(found)

    def sitemap_requests(self) -> Iterator[Request]:
        for url in self.sitemap_urls:
            yield Request(url, callback=self._parse_sitemap)

    def _queue_robots_sitemaps(self, request: Request, spider: Any) -> None:
        """Queue the robots.txt of a host this node has not queued one for, to be
        read as a sitemap (the shared dupefilter keeps it to one fetch)."""
        parts = urlparse_cached(request)
        if parts.scheme not in ("http", "https") or parts.path == "/robots.txt":
            return
        origin = f"{parts.scheme}://{parts.netloc}"
        if origin in self._robots_queued:
            return
        if len(self._robots_queued) >= HOSTS_REMEMBERED:
            self._robots_queued.clear()
        self._robots_queued.add(origin)
        self.crawler.stats.inc_value("sitemaps/robots_queued")
        robots = Request(
            origin + "/robots.txt",
            callback=self._parse_sitemap,
            meta={"dont_obey_robotstxt": True},  # the file itself
        )
        self.crawler.engine.crawl(robots)

    def _get_urls_and_callbacks_from_urlset(self, entries: Iterable[dict[str, Any]]):
        dated: list[tuple[Any, Any]] = []

        def noting(entries: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
            for entry in entries:
                if entry.get("lastmod") and self.sitemap_trust_lastmod:
                    dated.append((entry.get("loc"), entry["lastmod"]))
                yield entry

        pairs = SitemapSpider._get_urls_and_callbacks_from_urlset(self, noting(entries))  # type: ignore[arg-type]
        for loc, callback in pairs:
            if next(self._usable([loc]), None) is not None:
                yield loc, callback
        if dated:
            self._apply_lastmods(dated)

    def _apply_lastmods(self, dated: list[tuple[Any, Any]]) -> None:
        """Tell the pages kept for a recrawl what the sitemap says of them."""
        stats = self.crawler.stats
        assert stats is not None
        queue_by = self.crawler.settings.get("FRONTIER_QUEUE_BY")
        fingerprinter = self.crawler.request_fingerprinter
        entries = []
        latest = clock.now() + LASTMOD_SLACK
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
            name = getattr(self, "name", "")
            self._lastmod_target: Any = (
                MongoStatusStore.from_settings(self.crawler.settings, name)
                if store_kind(self.crawler.settings) == "mongo"
                else RecrawlStore(Frontier(self.server, SpiderKeys.for_crawler(self.crawler), ""))
            )
        if isinstance(self._lastmod_target, RecrawlStore):
            self._count_lastmods(self._apply_lastmod_batches(entries))
        else:  # MongoDB: off the reactor thread
            applied = threads.deferToThread(self._apply_lastmod_batches, entries)
            applied.addBoth(self._count_lastmods)

    def _apply_lastmod_batches(self, entries: list[tuple[str, str, float]]) -> Any:
        try:
            return apply_lastmods(self._lastmod_target, entries)
        except redis.RedisError as exc:  # MongoDB's errors reach _count_lastmods
            # the pages keep their dates: nothing is lost, the next read tries again
            logger.warning("could not apply a sitemap's lastmod dates: %s", exc)
            return 0, 0

    def _count_lastmods(self, moved: Any) -> None:
        stats = self.crawler.stats
        if isinstance(moved, tuple) and stats is not None:
            stats.inc_value("recrawl/lastmod_changed", moved[0])
            stats.inc_value("recrawl/lastmod_unchanged", moved[1])
        elif not isinstance(moved, tuple):
            message = moved.getErrorMessage() if hasattr(moved, "getErrorMessage") else moved
            logger.warning("could not apply a sitemap's lastmod dates: %s", message)
