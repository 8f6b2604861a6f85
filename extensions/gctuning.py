"""Keep Python's cyclic garbage collector out of a crawl's way.

A node's heap is mostly its start-up: Scrapy, Twisted, lxml bindings, the
stack's modules, about 100,000 objects that live as long as the process. With
Python's defaults a full collection walks all of them, several times a minute,
and a young-generation pass runs every 700 allocations, which a page's
parsing, requests and Deferreds reach many times over. Measured on the demo
shop (a node's crawl of ``make bench``, section 1), that was 4.9 s of the
collector in 20 s of CPU.

So, while a spider is open, this extension (``GarbageCollectorTuning``)

* freezes what is alive once the spider has opened (``gc.freeze``): collections
  no longer walk the start-up objects (``GC_FREEZE``);
* collects the young generation every ``GC_THRESHOLD[0]`` allocations instead
  of 700 (``GC_THRESHOLD``, Python's ``gc.set_threshold``). The price is
  memory: garbage caught in reference cycles (a failed download's traceback, a
  response and its selector) waits longer for its pass. On the demo shop a
  node peaked at 117 MB against 113 MB with Python's thresholds, with
  ``ResponseRelease`` below; without it, at 153 MB.

At close, the thresholds go back to what they were and frozen objects are
unfrozen once no crawler in the process is open, so a process that runs
crawls one after another (a test, a script with ``CrawlerProcess``) frees
what an earlier crawl left. ``ResponseRelease`` keeps the memory this costs
small, by taking parsed pages out of the cycles they would wait in.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from scrapy import signals

from extensions import defaults
from extensions.installed import switched_off

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)

# Crawlers of this process with a spider open, and the thresholds from before
# the first of them: the collector is process-wide, so the last one out restores.
_open_crawlers = 0
_saved_threshold: tuple[int, ...] = ()


def parse_threshold(value: object) -> tuple[int, int, int] | None:
    """``GC_THRESHOLD`` as three whole numbers, None when empty (Python's own);
    ValueError when it is neither."""
    if value in (None, "", [], ()):
        return None
    parts = value.split(",") if isinstance(value, str) else list(value)  # type: ignore[call-overload]
    try:
        numbers = tuple(int(str(part).strip()) for part in parts)
    except ValueError:
        raise ValueError("must be three whole numbers, e.g. 50000,20,20") from None
    if len(numbers) != 3:
        raise ValueError("must be three whole numbers, e.g. 50000,20,20")
    if numbers[0] < 1 or numbers[1] < 1 or numbers[2] < 1:
        raise ValueError("its numbers must be at least 1")
    return numbers


class GarbageCollectorTuning:
    def __init__(self, crawler: Crawler, threshold: tuple[int, int, int] | None, freeze: bool):
        self.crawler = crawler
        self.threshold = threshold
        self.freeze = freeze
        self.opened = False
        self._collections_at_open: list[int] = []
        crawler.signals.connect(self.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> GarbageCollectorTuning:
        s = crawler.settings
        threshold = parse_threshold(s.get("GC_THRESHOLD", defaults.GC_THRESHOLD))
        freeze = s.getbool("GC_FREEZE", defaults.GC_FREEZE)
        if threshold is None and not freeze:
            raise switched_off(cls, "GC_THRESHOLD is empty and GC_FREEZE is off")
        if not gc.isenabled():
            raise switched_off(cls, "the collector is off in this process")
        return cls(crawler, threshold, freeze)

    def spider_opened(self, spider: Spider) -> None:
        global _open_crawlers, _saved_threshold
        self.opened = True
        _open_crawlers += 1
        if _open_crawlers == 1:
            _saved_threshold = gc.get_threshold()
            if self.freeze:
                gc.collect()  # what is garbage now is not frozen with the rest
                gc.freeze()
        if self.threshold is not None:
            gc.set_threshold(*self.threshold)
        stats = self.crawler.stats
        assert stats is not None
        stats.set_value("gc/frozen_objects", gc.get_freeze_count())
        self._collections_at_open = [g["collections"] for g in gc.get_stats()]
        logger.debug(
            "collector: %d objects frozen, thresholds %s",
            gc.get_freeze_count(),
            gc.get_threshold(),
        )

    def spider_closed(self, spider: Spider) -> None:
        global _open_crawlers
        if not self.opened:
            return
        self.opened = False
        stats = self.crawler.stats
        assert stats is not None
        for generation, counts in enumerate(gc.get_stats()):
            before = self._collections_at_open[generation]
            stats.set_value(f"gc/collections/gen{generation}", counts["collections"] - before)
        _open_crawlers -= 1
        if _open_crawlers == 0:
            gc.set_threshold(*_saved_threshold)
            gc.unfreeze()


class ResponseRelease:
    """Spider middleware: once everything a callback made from a response has
    gone through, the response lets go of its cached selector.

    Scrapy's selector keeps a reference to its response, and the response keeps
    its selector: a cycle, which only the collector frees, body, lxml tree and
    all. Broken here, a parsed page is freed as soon as nothing else holds it,
    however rarely the collector runs. Asked for again, the selector is simply
    built again.
    """

    # TextResponse's private cache of ``response.selector``; a Scrapy that
    # renames it loses this saving, nothing else
    CACHE = "_cached_selector"

    def process_spider_output(
        self, response: Response, result: Iterable[Any], spider: Any = None
    ) -> Iterator[Any]:
        yield from result
        self._release(response)

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any], spider: Any = None
    ) -> AsyncIterator[Any]:
        async for output in result:
            yield output
        self._release(response)

    def _release(self, response: Response) -> None:
        if getattr(response, self.CACHE, None) is not None:
            setattr(response, self.CACHE, None)
