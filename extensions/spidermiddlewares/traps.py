"""Drop links that lead into crawler traps (``extensions.frontier.traps``).

Each link a callback yields is checked against the page it was found on;
a trap is dropped, counted in ``traps/dropped/REASON``, logged once per host
and reason, and added to its host's ``dropped:REASON`` count in Redis (every
few seconds), which ``scrapy status NAME --hosts`` shows.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import redis
from scrapy import Request, signals
from twisted.internet import task

from extensions import connection
from extensions.frontier.groups import group_for
from extensions.frontier.sent import sent_for
from extensions.frontier.traps import CHAIN, TrapDetector, TrapRules, shape
from extensions.installed import require_addon
from extensions.keys import SpiderKeys

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)

FLUSH_INTERVAL = 5.0  # seconds between writes of the per-host counts to Redis


class TrapMiddleware:
    def __init__(self, crawler: Crawler, detector: TrapDetector, server: redis.Redis):
        self.crawler = crawler
        self.stats = crawler.stats
        self.detector = detector
        self.server = server
        self.sent = sent_for(crawler)
        self.queue_by = crawler.settings.get("FRONTIER_QUEUE_BY")
        self._said: set[tuple[str, str]] = set()
        self._unwritten: Counter[tuple[str, str]] = Counter()
        self._loop: task.LoopingCall | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> TrapMiddleware:
        require_addon(crawler.settings, cls.__name__)
        detector = TrapDetector(TrapRules.from_settings(crawler.settings))
        server = connection.client_for(crawler)
        middleware = cls(crawler, detector, server)
        crawler.signals.connect(middleware._opened, signal=signals.spider_opened)
        crawler.signals.connect(middleware._closed, signal=signals.spider_closed)
        return middleware

    def _opened(self) -> None:
        self.keys = SpiderKeys.for_crawler(self.crawler)
        self._loop = task.LoopingCall(self.write_counts)
        self._loop.start(FLUSH_INTERVAL, now=False)

    def _closed(self) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self.write_counts()

    def write_counts(self) -> None:
        if not self._unwritten:
            return
        counts, self._unwritten = self._unwritten, Counter()
        pipe = self.server.pipeline(transaction=False)
        for (group, reason), count in counts.items():
            shard = self.keys.shard(self.keys.shard_of(group))
            pipe.hincrby(shard.host(group), f"dropped:{reason}", count)
        try:
            pipe.execute()
        except redis.RedisError as exc:
            logger.debug("trap counts not written (%s); kept for the next write", exc)
            self._unwritten.update(counts)

    def _page(self, response: Response) -> tuple[int, str]:
        """The page's chain length and shape, once for all its links."""
        parent = response.meta.get(CHAIN, 0) if response.request is not None else 0
        parent = parent if isinstance(parent, int) and not isinstance(parent, bool) else 0
        return parent, shape(response.url)

    def _keep(self, response: Response, request: Request, page: tuple[int, str]) -> bool:
        if self.sent.has_request(request):
            return True  # sent from this node before: the scheduler drops it unchecked
        chain = self.detector.chain_of(request.url, response.url, *page)
        reason = self.detector.reason(request.url, chain)
        if reason is None:
            if chain:
                request.meta[CHAIN] = chain
            return True
        group = group_for(request.url, request.meta.get("download_slot"), self.queue_by)
        self.stats.inc_value(f"traps/dropped/{reason}")
        self._unwritten[(group, reason)] += 1
        if (group, reason) not in self._said:
            self._said.add((group, reason))
            logger.warning(
                "dropping links of %s that look like a crawler trap (%s), e.g. %s "
                "(said once per host and reason)",
                group,
                reason.replace("_", " "),
                request.url[:200],
            )
        return False

    def process_spider_output(
        self, response: Response, result: Iterable[Any], spider: Any = None
    ) -> Iterator[Any]:
        page = self._page(response)
        for output in result:
            if not isinstance(output, Request) or self._keep(response, output, page):
                yield output

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any], spider: Any = None
    ) -> AsyncIterator[Any]:
        page = self._page(response)
        async for output in result:
            if not isinstance(output, Request) or self._keep(response, output, page):
                yield output
