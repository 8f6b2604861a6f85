"""The Scrapy extension that runs webhooks on a node (on with ``WEBHOOK_URLS``):
every second, in a worker thread, it looks at the crawls' states (every
LOOK_EVERY seconds) and sends what the outbox holds. A node that closes tells
what its crawl's end changed and sends what is due, for CLOSE_WAIT seconds at
most; what is left waits in Redis for the next node."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import NotConfigured
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import defer, task, threads
from twisted.python.failure import Failure

from extensions import clock, connection
from extensions.cluster.checkpoint import node_id_for
from extensions.installed import require_addon
from extensions.keys import SpiderKeys
from extensions.webhooks.delivery import Outbox
from extensions.webhooks.events import CrawlEvents
from extensions.webhooks.pages import PageBundles, page_events_on

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

TICK = 1.0
LOOK_EVERY = 2.0
CLOSE_WAIT = 30.0
#: crawl.pages batches one tick bundles at most
BUNDLES = 10


class Webhooks:
    def __init__(self, crawler: Crawler):
        self.crawler = crawler
        self.stats = crawler.stats
        self.settings = crawler.settings
        self.events: CrawlEvents | None = None
        self.outbox: Outbox | None = None
        #: WEBHOOK_PAGE_EVENTS: the crawl.pages bundler
        self.pages: PageBundles | None = None
        self._loop: task.LoopingCall | None = None
        self._busy: defer.Deferred[Any] | None = None
        self._next_look = 0.0
        self._error_said = ""

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Webhooks:
        require_addon(crawler.settings, cls.__name__)
        if not crawler.settings.getlist("WEBHOOK_URLS"):
            raise NotConfigured  # no WEBHOOK_URLS: off, silently
        extension = cls(crawler)
        crawler.signals.connect(extension.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(extension.spider_closed, signal=signals.spider_closed)
        return extension

    def spider_opened(self, spider: Spider) -> None:
        s = self.settings
        server = connection.client_for(self.crawler)
        keys = SpiderKeys.for_crawler(self.crawler)
        urls = s.getlist("WEBHOOK_URLS")
        self.events = CrawlEvents(server, keys, urls)
        self.outbox = Outbox(
            server, keys, node_id_for(self.crawler), s.get("WEBHOOK_SECRET"),
            retries=s.getint("WEBHOOK_RETRIES"), timeout=s.getfloat("WEBHOOK_TIMEOUT"),
            user_agent=s.get("USER_AGENT") or "",
        )  # fmt: skip
        if page_events_on(s):
            self.pages = PageBundles(server, keys, urls, s.getint("WEBHOOK_PAGE_BATCH"))
        logger.info("crawl events go to %d webhook URLs", len(urls))
        self._loop = task.LoopingCall(self._tick)
        self._loop.start(TICK, now=True)

    def _tick(self) -> None:
        if self._busy is not None:
            return
        self._busy = threads.deferToThread(self._work)
        self._busy.addBoth(self._done)

    def _work(self) -> None:
        assert self.events is not None and self.outbox is not None
        if self.outbox.group_missing:
            self.outbox.open()
        if time.monotonic() >= self._next_look:
            self._next_look = time.monotonic() + LOOK_EVERY
            for kind in self.events.look():
                self.stats.inc_value(f"webhooks/told/{kind}")
        self._bundle(force=False)
        self.outbox.send_due()

    def _bundle(self, force: bool) -> None:
        """The pages pushed, into crawl.pages events: a batch at a time, at most
        BUNDLES a tick (a closing node: until none is left)."""
        if self.pages is None:
            return
        for _ in range(BUNDLES if not force else 10_000):
            told = self.pages.bundle(force)
            if not told:
                return
            self.stats.inc_value("webhooks/told/crawl.pages", told)

    def _done(self, result: Any) -> None:
        self._busy = None
        self._count()
        if isinstance(result, Failure):
            problem = result.getErrorMessage()
            if problem != self._error_said:  # a Redis outage: said once, tried every tick
                logger.warning("webhooks: %s; trying again", problem)
                self._error_said = problem
            self.stats.inc_value("webhooks/errors")
        else:
            self._error_said = ""

    def _count(self) -> None:
        if self.outbox is not None:
            self.stats.set_value("webhooks/delivered", self.outbox.delivered)
            self.stats.set_value("webhooks/failed_tries", self.outbox.failed)
            self.stats.set_value("webhooks/dead", self.outbox.dead_count)

    async def spider_closed(self, spider: Spider, reason: str) -> None:
        if self._loop is None:
            return
        if self._loop.running:
            self._loop.stop()
        if self._busy is not None:
            await maybe_deferred_to_future(self._busy)
        drained = threads.deferToThread(self._drain)
        drained.addBoth(self._done)
        await maybe_deferred_to_future(drained)

    def _drain(self) -> None:
        """What the node's end changed, told; what is due, sent, for CLOSE_WAIT at most."""
        assert self.events is not None and self.outbox is not None
        for kind in self.events.look():
            self.stats.inc_value(f"webhooks/told/{kind}")
        self._bundle(force=True)
        deadline = time.monotonic() + CLOSE_WAIT
        while time.monotonic() < deadline:
            if self.outbox.send_due():
                continue
            if not self.outbox.due_by(clock.now() + deadline - time.monotonic()):
                return
            time.sleep(0.2)
        left = self.outbox.waiting()
        if left:
            logger.warning("webhooks: %d events left in the outbox for the next node", left)
