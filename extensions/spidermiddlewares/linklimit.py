"""At most ``MAX_LINKS_PER_PAGE`` requests from one response.

A hostile or broken page can hold hundreds of thousands of links: each one
costs a fingerprint, a JSON encoding and a place in the shared queue, and
taken together they flood the frontier. Past the limit, requests a callback
yields are dropped (items still pass), counted in ``links/over_limit`` and
logged once per page. Spiders that extract links themselves can ask for the
limit (``LinkLimitMiddleware.limit_for(crawler)``) so as not to extract more.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from scrapy import Request

from extensions.installed import require_addon, switched_off

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)


def page_over_limit(stats: Any, url: str, limit: int, dropped: int = 0) -> None:
    """Say that the page at ``url`` had more links than the limit; count ``dropped``."""
    logger.warning(
        "%s has more than MAX_LINKS_PER_PAGE (%d) links; the rest are dropped", url[:200], limit
    )
    stats.inc_value("links/pages_over_limit")
    if dropped:
        stats.inc_value("links/over_limit", dropped)


class LinkLimitMiddleware:
    def __init__(self, crawler: Crawler, limit: int):
        self.stats = crawler.stats
        self.limit = limit

    @classmethod
    def limit_for(cls, crawler: Crawler) -> int:
        return crawler.settings.getint("MAX_LINKS_PER_PAGE")

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> LinkLimitMiddleware:
        require_addon(crawler.settings, cls.__name__)
        limit = cls.limit_for(crawler)
        if limit <= 0:
            raise switched_off(cls, "MAX_LINKS_PER_PAGE is 0: no limit")
        return cls(crawler, limit)

    def _over(self, response: Response, count: int) -> bool:
        if count <= self.limit:
            return False
        if count == self.limit + 1:
            page_over_limit(self.stats, response.url, self.limit)
        self.stats.inc_value("links/over_limit")
        return True

    def process_spider_output(
        self, response: Response, result: Iterable[Any], spider: Any = None
    ) -> Iterator[Any]:
        count = 0
        for output in result:
            if isinstance(output, Request):
                count += 1
                if self._over(response, count):
                    continue
            yield output

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any], spider: Any = None
    ) -> AsyncIterator[Any]:
        count = 0
        async for output in result:
            if isinstance(output, Request):
                count += 1
                if self._over(response, count):
                    continue
            yield output
