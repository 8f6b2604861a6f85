"""The scope on a node's link path and at its downloader.

``ScopeMiddleware`` (a spider middleware) judges every request a callback
yields against its crawl's scope before it goes to the frontier: what is out
is dropped and counted (``scope/excluded``, ``scope/depth``,
``scope/outside``, ``scope/limit``), what is in carries its trail on. The
spider's own rules (``allowed_domains``, its link extractors) have run already:
the scope narrows what they let through, never widens it.

``ScopeFetches`` (a downloader middleware) counts the pages and bytes a crawl
with limits fetched, for ``max_pages``, ``max_bytes`` and ``max_pages_per_host``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from scrapy import Request

from extensions.meta import CRAWL_ID
from extensions.runtime import peek_state
from extensions.scope.part import STATE

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from extensions.scope.state import ScopeState


class ScopeMiddleware:
    def __init__(self, crawler: Crawler):
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ScopeMiddleware:
        return cls(crawler)

    def _state(self) -> ScopeState | None:
        # built with the node's frontier (ScopePart), after the middlewares
        return peek_state(self.crawler, STATE)

    def process_spider_output(
        self, response: Response, result: Iterable[Any], spider: Any = None
    ) -> Iterator[Any]:
        state = self._state()
        for output in result:
            if _passes(state, response, output):
                yield output

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any], spider: Any = None
    ) -> AsyncIterator[Any]:
        state = self._state()
        async for output in result:
            if _passes(state, response, output):
                yield output


def _passes(state: ScopeState | None, response: Response, output: Any) -> bool:
    """An item, or a request its crawl's scope takes (what it refuses is counted)."""
    if state is None or not isinstance(output, Request) or response.request is None:
        return True
    return state.child(response.request, output) is None


class ScopeFetches:
    def __init__(self, crawler: Crawler):
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ScopeFetches:
        return cls(crawler)

    def process_response(self, request: Request, response: Response, spider: Any = None) -> Any:
        state: ScopeState | None = peek_state(self.crawler, STATE)
        if state is not None:
            crawl = request.meta.get(CRAWL_ID) or ""
            if state.has_limits(crawl) and state.is_page(request):
                state.fetched(crawl, len(response.body), request.url)
        return response
