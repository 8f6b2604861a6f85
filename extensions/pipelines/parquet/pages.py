"""Which page each item came from, for the Parquet store: the lease member of the
response's request, noted as the spider yields the item and taken by the item
pipeline. An item an earlier pipeline dropped is forgotten with its page, once
the engine is done with it, so the notes never outgrow the pages in flight."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from scrapy import Request
from scrapy.exceptions import NotConfigured

from extensions.frontier.leased import leased_for
from extensions.installed import require_addon
from extensions.pipelines.declared import stores_named
from extensions.runtime import state_of

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response


class ItemPages:
    def __init__(self) -> None:
        #: id(item) -> (the item, kept alive while noted; its page)
        self._by_id: dict[int, tuple[Any, bytes]] = {}
        self._of_page: dict[bytes, list[int]] = {}

    def put(self, item: Any, page: bytes) -> None:
        self._by_id[id(item)] = (item, page)
        self._of_page.setdefault(page, []).append(id(item))

    def pop(self, item: Any) -> bytes:
        entry = self._by_id.get(id(item))
        if entry is None or entry[0] is not item:
            return b""
        del self._by_id[id(item)]
        return entry[1]

    def forget_page(self, page: bytes) -> None:
        for key in self._of_page.pop(page, ()):
            entry = self._by_id.get(key)
            if entry is not None and entry[1] == page:
                del self._by_id[key]

    def __len__(self) -> int:
        return len(self._by_id)


def item_pages(crawler: Crawler) -> ItemPages:
    return state_of(crawler, ItemPages, ItemPages)


def wants_pages(settings: Any) -> bool:
    return "parquet" in stores_named(settings)


class ItemPagesMiddleware:
    def __init__(self, crawler: Crawler):
        self.pages = item_pages(crawler)
        self.leased = leased_for(crawler)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ItemPagesMiddleware:
        if not wants_pages(crawler.settings):
            raise NotConfigured  # no Parquet store: off, silently
        require_addon(crawler.settings, cls.__name__)
        return cls(crawler)

    def _note(self, output: Any, page: bytes) -> Any:
        if page and not isinstance(output, Request):
            self.pages.put(output, page)
        return output

    def process_spider_output(
        self, response: Response, result: Iterable[Any], spider: Any = None
    ) -> Iterator[Any]:
        page = self.leased.member_of(response.request) if response.request else b""
        for output in result:
            yield self._note(output, page)

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any], spider: Any = None
    ) -> AsyncIterator[Any]:
        page = self.leased.member_of(response.request) if response.request else b""
        async for output in result:
            yield self._note(output, page)
