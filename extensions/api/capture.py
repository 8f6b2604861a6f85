"""Keeps the page of each API crawl as the call asked for it (``documents.py``),
before any other middleware may drop its response (an error status is a page
too, with its ``statusCode``), until the engine is done with its request; the
part then writes it with the flush that releases it (``part.py``). Pages of
other crawls pass untouched."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import redis
from scrapy import Request

from extensions import connection
from extensions.api.declared import PREFIX
from extensions.api.documents import firecrawl_document, listed_links
from extensions.installed import require_addon
from extensions.keys import SpiderKeys
from extensions.meta import CRAWL_ID
from extensions.runtime import state_of
from extensions.scope.rules import reads_sitemap

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)

#: seconds a call's options are taken as read (they never change)
OPTIONS_TTL = 300.0
OPTIONS_KEPT = 1000
#: URLs a map keeps on one node when its call names no limit
MAP_KEPT = 5000


class Captured:
    """The documents of requests the engine is not done with (by the request),
    and those of requests it finished, which the next flush writes."""

    #: documents held for unfinished requests at most (past it, the oldest go
    #: with the next flush: a request that never finishes holds none for ever)
    HELD = 10_000

    def __init__(self) -> None:
        self.held: dict[int, list[tuple[str, str]]] = {}
        self.ready: list[tuple[str, str]] = []

    def hold(self, request: Any, crawl: str, document: str) -> None:
        if id(request) not in self.held and len(self.held) >= self.HELD:
            oldest = next(iter(self.held))
            self.ready.extend(self.held.pop(oldest))
        self.held.setdefault(id(request), []).append((crawl, document))

    def finished(self, request: Any) -> None:
        self.ready.extend(self.held.pop(id(request), ()))


def captured(crawler: Crawler) -> Captured:
    return state_of(crawler, Captured, Captured)


class ApiCaptureMiddleware:
    def __init__(self, crawler: Crawler):
        self.crawler = crawler
        self.stats = crawler.stats
        self.pending = captured(crawler)
        self._options: dict[str, tuple[dict[str, Any], float]] = {}
        #: URLs each map kept on this node (forgotten with the options)
        self._mapped: dict[str, int] = {}

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ApiCaptureMiddleware:
        require_addon(crawler.settings, cls.__name__)
        return cls(crawler)

    def job(self, crawl: str) -> dict[str, Any]:
        """What the call asked (its kind, its options), as ``jobs.py`` keeps it."""
        now = time.monotonic()
        known = self._options.get(crawl)
        if known is not None and known[1] > now:
            return known[0]
        found: dict[str, Any] = {}
        try:
            keys = SpiderKeys.for_crawler(self.crawler)
            raw = connection.client_for(self.crawler).hget(keys.named("api_jobs"), crawl)
            job = json.loads(raw) if raw else {}
            found = job if isinstance(job, dict) else {}
        except redis.RedisError as exc:
            connection.health_for(self.crawler).failed(exc)
            return found  # the defaults, and read again next time
        except ValueError:
            self.stats.inc_value("api/bad_job")
        if len(self._options) >= OPTIONS_KEPT:
            self._options.clear()
            self._mapped.clear()
        self._options[crawl] = (found if isinstance(found, dict) else {}, now + OPTIONS_TTL)
        return self._options[crawl][0]

    def process_spider_input(self, response: Response, spider: Any = None) -> None:
        crawl = response.meta.get(CRAWL_ID)
        if not isinstance(crawl, str) or not crawl.startswith(PREFIX):
            return
        job = self.job(crawl)
        if job.get("kind") == "map":
            for url in listed_links(response):  # an llms.txt: the links it lists
                self._map_url(response, crawl, url)
            return
        if reads_sitemap(response.request):
            return  # a robots.txt or sitemap read for its URLs: no page of the crawl
        try:
            options = job.get("options")
            document = firecrawl_document(response, options if isinstance(options, dict) else {})
        except Exception:  # a page the API cannot render is the crawl's, not a failed node
            logger.exception("the API document of %s could not be made", response.url[:200])
            self.stats.inc_value("api/capture_failed")
            return
        self.pending.hold(response.request, crawl, json.dumps(document, default=str))
        self.stats.inc_value("api/pages")

    def _kind(self, response: Response) -> str:
        crawl = response.meta.get(CRAWL_ID)
        if not isinstance(crawl, str) or not crawl.startswith(PREFIX):
            return ""
        return str(self.job(crawl).get("kind") or "")

    def _passes(self, response: Response, kind: str, output: Any) -> bool:
        """A scrape is one page: the links its spider yields are not followed. A map
        fetches no page: what a sitemap lists is kept as a URL, not requested (a
        sitemap a sitemap index names is read)."""
        if not isinstance(output, Request) or kind not in ("scrape", "map"):
            return True
        if kind == "map":
            if reads_sitemap(output):
                return True
            self._map_url(response, response.meta[CRAWL_ID], output.url)
        return False

    def _map_url(self, response: Response, crawl: str, url: str) -> None:
        """A URL a map found, kept up to the map's limit on this node (its
        sitemaps may list millions: the answer takes no more than the limit)."""
        held = self._mapped.get(crawl, 0)
        if held >= int(self.job(crawl).get("limit") or MAP_KEPT):
            self.stats.inc_value("api/map_urls_over_limit")
            return
        self._mapped[crawl] = held + 1
        self.pending.hold(response.request, crawl, json.dumps({"url": url}))

    def process_spider_output(self, response: Response, result: Iterable[Any],
                              spider: Any = None) -> Iterator[Any]:  # fmt: skip
        kind = self._kind(response)
        for output in result:
            if self._passes(response, kind, output):
                yield output

    async def process_spider_output_async(self, response: Response, result: AsyncIterator[Any],
                                          spider: Any = None) -> AsyncIterator[Any]:  # fmt: skip
        kind = self._kind(response)
        async for output in result:
            if self._passes(response, kind, output):
                yield output
