"""Crawl ids in a node's frontier: a crawl is registered when its first request
is queued, ended when its expiry passes, and its work left out of an idle node's
wait while it is paused; its done and item counts go with the flush that
releases its pages (``tally.py``)."""

from __future__ import annotations

import collections
import logging
from typing import TYPE_CHECKING, Any

import redis

from extensions.connection import text
from extensions.crawlid import item_counts
from extensions.frontier.crawls.state import Crawls
from extensions.frontier.crawls.tally import CrawlTally
from extensions.frontier.part import FrontierPart, StatusView
from extensions.meta import CRAWL_ID, DEAD_LETTERED

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.statscollectors import StatsCollector

    from extensions.connection import RedisHealth
    from extensions.frontier.context import PartContext
    from extensions.frontier.results import FrontierSizes

logger = logging.getLogger(__name__)


class CrawlsPart(FrontierPart):
    def __init__(
        self, crawls: Crawls, stats: StatsCollector, health: RedisHealth, tally: CrawlTally
    ):
        self.crawls = crawls
        self.stats = stats
        self.health = health
        self.tally = tally

    @classmethod
    def from_context(cls, context: PartContext) -> CrawlsPart:
        tally = CrawlTally(item_counts(context.crawler))
        context.write_with_flush(tally)
        return cls(Crawls(context.server, context.keys), context.stats, context.health, tally)

    @classmethod
    def status(cls, view: StatusView) -> dict[str, Any]:
        """The crawls under an id by state (``scrapy crawls NAME`` lists them)."""
        states: Any = view.server.hgetall(view.keys.crawls)
        crawls = collections.Counter(
            text(state) for crawl, state in states.items() if text(crawl) not in ("*", "")
        )
        return {"crawls": dict(crawls)}

    @classmethod
    def status_lines(cls, status: dict[str, Any]) -> list[str]:
        if not status.get("crawls"):
            return []
        counts = ", ".join(f"{n} {state}" for state, n in sorted(status["crawls"].items()))
        return [f"crawls under an id: {counts} (scrapy crawls {status['spider']})"]

    def enqueued(self, request: Request) -> None:
        crawl = request.meta.get(CRAWL_ID)
        if crawl:
            try:
                self.crawls.ensure(crawl)
            except redis.RedisError as exc:  # registered by the next request of it
                self.health.failed(exc)

    def finished(self, request: Request) -> None:
        if not request.meta.get(DEAD_LETTERED):
            self.tally.finished(request.meta.get(CRAWL_ID))

    def heartbeat(self) -> None:
        """Crawls whose expiry passed stop (any node, each once); a stopped one
        whose emptying was cut short is emptied further."""
        for crawl, state, removed in self.crawls.end_due():
            if state == "expired":
                logger.info("crawl %s expired: %d queued requests removed", crawl, removed)
                self.stats.inc_value("crawls/expired")
            if removed:
                self.stats.inc_value("crawls/removed", removed)

    def idle_pending(self, pending: int, sizes: FrontierSizes, now: float) -> int:
        """Paused crawls' work is not work a node can do: whether it waits for
        their resume follows MAX_IDLE_TIME_BEFORE_CLOSE like any idle spell."""
        return pending - self.crawls.paused_pending(sizes) if pending else 0
