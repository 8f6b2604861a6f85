"""Requests and items belong to the crawl of the response they come from.

A request a callback yields without a crawl id of its own joins its response's
crawl (``request.meta["crawl_id"]``); the spider's own start requests join
``CRAWL_ID`` (a setting, or ``-a crawl_id=ID``, as scrapyd's ``schedule`` passes
either). Items carry the id into the item store as ``_crawl``, and are counted
per crawl (``NAME:crawl:ID`` ``items``).
"""

from __future__ import annotations

import weakref
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from scrapy import Request, signals

from extensions.crawlid import ITEMS_WITHOUT_ID, crawl_id_problem, item_counts
from extensions.installed import require_addon
from extensions.meta import CRAWL_ID, START_ENTRY
from extensions.runtime import state_of

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response

#: the field of a stored item that names its crawl
CRAWL_FIELD = "_crawl"


class ItemCrawls:
    """The crawl of items that cannot take a field (Scrapy ``Item`` classes
    without a ``_crawl`` field, dataclasses), held only as long as the item lives
    (``itemtimes.py`` notes fetch times this way too)."""

    def __init__(self) -> None:
        self._by_id: dict[int, tuple[weakref.ref, Any]] = {}

    def put(self, item: Any, crawl: Any) -> bool:
        key = id(item)

        def forget(_ref: weakref.ref) -> None:
            self._by_id.pop(key, None)

        try:
            ref = weakref.ref(item, forget)
        except TypeError:
            return False
        self._by_id[key] = (ref, crawl)
        return True

    def pop(self, item: Any) -> Any:
        entry = self._by_id.get(id(item))
        if entry is None or entry[0]() is not item:
            return None
        del self._by_id[id(item)]
        return entry[1]

    def __len__(self) -> int:
        return len(self._by_id)


def item_crawls(crawler: Crawler) -> ItemCrawls:
    return state_of(crawler, "item_crawls", ItemCrawls)


def crawl_of_item(crawler: Crawler, item: Any) -> str | None:
    """The crawl an item belongs to, for the item store (None: no crawl id)."""
    if isinstance(item, dict):
        value = item.get(CRAWL_FIELD)
        return value if isinstance(value, str) else None
    return item_crawls(crawler).pop(item)


class CrawlIdMiddleware:
    def __init__(self, crawler: Crawler, default: str):
        self.crawler = crawler
        self.stats = crawler.stats
        self.default = default
        self.items = item_crawls(crawler)
        self.counts = item_counts(crawler)
        crawler.signals.connect(self._item_scraped, signal=signals.item_scraped)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> CrawlIdMiddleware:
        require_addon(crawler.settings, cls.__name__)
        # a setting (-s CRAWL_ID=ID) or a spider argument (-a crawl_id=ID)
        default = crawler.settings.get("CRAWL_ID") or ""
        if not default:
            default = getattr(crawler.spider or crawler.spidercls, "crawl_id", "") or ""
        if default:
            problem = crawl_id_problem(default)
            if problem:
                raise ValueError(f"CRAWL_ID: {problem}")
        return cls(crawler, default)

    def _stamp(self, output: Any, crawl: str) -> Any:
        if isinstance(output, Request):
            if not output.meta.get(CRAWL_ID):
                output.meta[CRAWL_ID] = crawl
        elif isinstance(output, dict):
            output.setdefault(CRAWL_FIELD, crawl)
        elif not self._has_field(output, crawl) and not self.items.put(output, crawl):
            self.stats.inc_value("crawls/items_without_id")
        return output

    @staticmethod
    def _has_field(item: Any, crawl: str) -> bool:
        fields = getattr(item, "fields", None)  # a Scrapy Item declaring _crawl
        if isinstance(fields, dict) and CRAWL_FIELD in fields:
            item.setdefault(CRAWL_FIELD, crawl)
            return True
        return False

    def _item_scraped(self, item: Any, response: Any = None, spider: Any = None) -> None:
        try:
            crawl = response.meta.get(CRAWL_ID)
        except AttributeError:  # a response without its request
            return
        if crawl:
            self.counts[crawl] = self.counts.get(crawl, 0) + 1
        else:
            # counted, not worked out as all items less the named crawls': the two
            # reach Redis at different moments, and their difference flickers
            self.stats.inc_value(ITEMS_WITHOUT_ID)

    async def process_start(self, start: AsyncIterator[Any]) -> AsyncIterator[Any]:
        async for output in start:
            # a start entry from Redis names its own crawl, or none
            if self.default and isinstance(output, Request) and START_ENTRY not in output.meta:
                self._stamp(output, self.default)
            yield output

    def process_spider_output(
        self, response: Response, result: Iterable[Any], spider: Any = None
    ) -> Iterator[Any]:
        crawl = response.meta.get(CRAWL_ID)
        for output in result:
            yield self._stamp(output, crawl) if crawl else output

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any], spider: Any = None
    ) -> AsyncIterator[Any]:
        crawl = response.meta.get(CRAWL_ID)
        async for output in result:
            yield self._stamp(output, crawl) if crawl else output
