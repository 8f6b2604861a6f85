"""A task for a callback's output only where it has to wait.

Scrapy (2.13 and later, on asyncio) hands what a callback yields to
``CONCURRENT_ITEMS`` worker tasks, started for every response whatever it
yields, through a queue. A page that yields five links and an item pays for
100 tasks: on the demo shop that was a fifth of plain Scrapy's CPU a page,
and 16 of them still cost 0.1 ms a page.

``SpiderOutputTasks`` (an extension, on in the add-on and usable without it)
has the scraper process the output in its own coroutine instead:

* a request is scheduled where the callback yields it: Scrapy's
  ``engine.crawl``, which never waits;
* an item goes to the pipelines in a task of its own, at most
  ``CONCURRENT_ITEMS`` of them at once; the callback's next output is taken
  while they run, and the response is done when all of them are.

What the pipelines see is the same: each item once, up to ``CONCURRENT_ITEMS``
of one response at once. What differs is when a request reaches the scheduler:
as it is yielded, where Scrapy's workers took it in its turn, after the items
yielded before it had started. So the next page can be fetched while this
one's items still wait in a slow pipeline. An error in the callback goes to Scrapy's
``handle_spider_error`` as before; an error scheduling one output is logged
and the rest go on (Scrapy's worker task would end with it).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from scrapy import Request, signals
from scrapy.utils.asyncgen import as_async_generator
from scrapy.utils.defer import aiter_errback, iter_errback

from extensions import engine

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine, Iterable

    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)


async def process_outputs(
    outputs: AsyncIterator[Any],
    limit: int,
    process: Callable[[Any], Coroutine[Any, Any, None]],
) -> int:
    """Run ``process`` on each output: a request at once, anything else in a
    task, at most ``limit`` tasks at once. Returns, once all have finished, the
    most tasks that ran at once."""
    running: set[asyncio.Future[None]] = set()
    most = 0

    def finished(task: asyncio.Future[None]) -> None:
        running.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("Error processing a callback's output", exc_info=task.exception())

    async for output in outputs:
        if isinstance(output, Request):
            try:
                await process(output)
            except Exception:
                logger.exception("Error scheduling %s", output)
            continue
        while len(running) >= limit:
            await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
        task = asyncio.ensure_future(process(output))
        running.add(task)
        task.add_done_callback(finished)
        most = max(most, len(running))
    if running:
        await asyncio.wait(running)
    return most


class SpiderOutputTasks:
    def __init__(self, crawler: Crawler):
        self.crawler = crawler
        self.stats = crawler.stats
        # Scrapy's workers with 0 would take nothing; here at least one runs
        self.limit = max(1, crawler.settings.getint("CONCURRENT_ITEMS"))
        self.process: Callable[[Any, Any], Coroutine[Any, Any, None]] | None = None
        self.on_error: Callable[..., Any] | None = None
        crawler.signals.connect(self.engine_started, signals.engine_started)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SpiderOutputTasks:
        return cls(crawler)

    def engine_started(self) -> None:
        problem = engine.output_seam_problem(self.crawler)
        if problem is not None:
            logger.info("Callback output goes through Scrapy's worker tasks: %s", problem)
            return
        scraper = self.crawler.engine.scraper
        self.process = engine.output_processor(scraper)
        self.on_error = scraper.handle_spider_error
        engine.take_output_handling(self.crawler, self.handle)
        logger.info("Callback output: requests scheduled as yielded, a task an item, "
                    "at most %d at once (CONCURRENT_ITEMS)", self.limit)  # fmt: skip

    async def handle(self, result: Iterable[Any] | AsyncIterator[Any], request: Request,
                     response: Any) -> None:  # fmt: skip
        process, on_error = self.process, self.on_error
        assert process is not None and on_error is not None
        outputs: AsyncIterator[Any]
        if isinstance(result, AsyncIterator):
            outputs = aiter_errback(result, on_error, request, response)
        else:
            outputs = as_async_generator(iter_errback(result, on_error, request, response))
        most = await process_outputs(outputs, self.limit, lambda output: process(output, response))
        if most:  # whether CONCURRENT_ITEMS holds items back: it equals the limit
            self.stats.max_value("spider_output/items_at_once", most)
