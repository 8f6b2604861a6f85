"""The crawl's link graph, for host ranks (``frontier/ranks/``): each request
a callback yields for a host outside the page's registered domain is a vote of
that domain for the host's queue group. On whenever ranks are used
(``FRONTIER_ORDER = "importance"`` or ``HOST_BUDGET_BY_RANK``).

The node sends each (group, domain) link once (it remembers up to
``LINKS_REMEMBERED``, then forgets them all and starts again), in batches of
``LINKS_PER_WRITE`` or every second: one script call per shard, costing Redis
a PFADD per new link. A write Redis does not take is dropped, logged once and
counted (``hostrank/errors``): the ranks are a sketch, and the same links come
again from other pages.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import redis
from scrapy import Request, signals
from twisted.internet import task

from extensions import connection
from extensions.crawlid import host_of
from extensions.frontier.domains import registered_domain
from extensions.frontier.groups import queue_group_for
from extensions.frontier.ranks.state import HostRanks
from extensions.installed import require_addon, switched_off
from extensions.keys import SpiderKeys

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)

LINKS_REMEMBERED = 100_000  # links a node knows it sent (a few MB), then it starts again
LINKS_PER_WRITE = 500
WRITE_INTERVAL = 1.0  # seconds between writes of what a node has


def ranks_used(settings: Any) -> bool:
    return settings.get("FRONTIER_ORDER") == "importance" or bool(
        settings.getdict("HOST_BUDGET_BY_RANK")
    )


class LinkGraphMiddleware:
    def __init__(self, crawler: Crawler):
        self.stats = crawler.stats
        self.queue_by = crawler.settings.get("FRONTIER_QUEUE_BY")
        self.health = connection.health_for(crawler)
        self.ranks = HostRanks(connection.client_for(crawler), SpiderKeys.for_crawler(crawler))
        self._sent: set[int] = set()  # the links sent lately, hashed
        self._batch: list[tuple[str, str, str]] = []
        self._failed_said = False
        self._loop = task.LoopingCall(self.write)
        crawler.signals.connect(self._opened, signals.spider_opened)
        crawler.signals.connect(self._closed, signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> LinkGraphMiddleware:
        require_addon(crawler.settings, cls.__name__)
        if not ranks_used(crawler.settings):
            raise switched_off(cls, "no FRONTIER_ORDER = 'importance' and no HOST_BUDGET_BY_RANK")
        return cls(crawler)

    def _opened(self, spider: Any) -> None:
        self._loop.start(WRITE_INTERVAL, now=False)

    def _closed(self, spider: Any) -> None:
        if self._loop.running:
            self._loop.stop()
        self.write()

    def _note(self, source: str | None, request: Request) -> None:
        if source is None:
            return
        try:
            host = (urlsplit(request.url).hostname or "").lower()
        except ValueError:
            return
        if not host or registered_domain(host) == source:
            return  # a site's links to itself say nothing of it
        queued = queue_group_for(request.url, request.meta, self.queue_by)
        link = (host_of(queued), queued, source)
        seen = hash(link)  # (a collision only leaves one vote out)
        if seen in self._sent:
            return
        if len(self._sent) >= LINKS_REMEMBERED:
            self._sent.clear()  # links sent again count no more: a PFADD is idempotent
        self._sent.add(seen)
        self._batch.append(link)
        if len(self._batch) >= LINKS_PER_WRITE:
            self.write()

    def write(self) -> None:
        batch, self._batch = self._batch, []
        if not batch:
            return
        try:
            raised, bad = self.ranks.add_links(batch)
        except redis.RedisError as exc:
            self.health.failed(exc)
            self.stats.inc_value("hostrank/errors")
            for link in batch:  # sent again when a page links to it again
                self._sent.discard(hash(link))
            if not self._failed_said:
                self._failed_said = True
                logger.warning("links for host ranks not written (%s); the next go on", exc)
            return
        self.stats.inc_value("hostrank/links", len(batch))
        if raised:
            self.stats.inc_value("hostrank/raised", raised)
        if bad:
            self.stats.inc_value("hostrank/bad_records", bad)
            logger.warning("%d host-rank keys held something else: replaced", bad)

    def _source(self, response: Response) -> str | None:
        try:
            host = (urlsplit(response.url).hostname or "").lower()
        except ValueError:
            return None
        return registered_domain(host) if host else None

    def process_spider_output(
        self, response: Response, result: Iterable[Any], spider: Any = None
    ) -> Iterator[Any]:
        source = self._source(response)
        for output in result:
            if isinstance(output, Request):
                self._note(source, output)
            yield output

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any], spider: Any = None
    ) -> AsyncIterator[Any]:
        source = self._source(response)
        async for output in result:
            if isinstance(output, Request):
                self._note(source, output)
            yield output
