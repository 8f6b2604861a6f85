"""Recrawls in a node's frontier: each heartbeat, pages due for a recrawl go back
into the queue (any node, each once); with ``RECRAWL_STORE = "mongo"`` the kept
pages' records go to MongoDB first, and only once it has them are their leases
released."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from twisted.internet import threads
from twisted.python.failure import Failure

from extensions import engine
from extensions.frontier.part import FrontierPart, StatusView
from extensions.frontier.recrawls.statuses import StatusBatches
from extensions.recrawl.statusstore import MongoStatusStore, store_kind

if TYPE_CHECKING:
    from scrapy import Spider

    from extensions.frontier.node import NodeFrontier

logger = logging.getLogger(__name__)


class RecrawlPart(FrontierPart):
    figures = {"recrawl": "kept for a recrawl", "due": "recrawls due"}

    def __init__(self, node: NodeFrontier):
        self.node = node
        self.stats = node.stats
        settings = node.crawler.settings
        self.store_kind = store_kind(settings)
        self.feed_batch = settings.getint("RECRAWL_FEED_BATCH")
        self.claim_timeout = settings.getfloat("RECRAWL_CLAIM_TIMEOUT")
        #: RECRAWL_STORE = "mongo": the store, and the finished requests whose
        #: revisit record it has yet to take (their leases wait for it)
        self.status_store: MongoStatusStore | None = None
        self.statuses: StatusBatches | None = None
        self._feeding = False

    @classmethod
    def from_node(cls, node: NodeFrontier) -> RecrawlPart:
        return cls(node)

    @classmethod
    def status(cls, view: StatusView) -> dict[str, Any]:
        """The pages kept for a recrawl, those due now and in each hour ahead."""
        kept = view.status_store or view.frontier
        schedule = kept.recrawl_schedule(view.hours_ahead)
        return {"recrawl": schedule.pages, "due": schedule.due, "due_by_hour": schedule.due_by_hour}

    @classmethod
    def status_lines(cls, status: dict[str, Any]) -> list[str]:
        if not status.get("recrawl"):
            return []
        ahead = status.get("due_by_hour") or []
        return [
            f"recrawl: {status['recrawl']} pages kept, {status['due']} due now"
            + (f"; due per hour ahead: {' '.join(map(str, ahead))}" if ahead else "")
        ]

    def open(self, spider: Spider) -> None:
        if self.store_kind != "mongo":
            return
        node = self.node
        self.status_store = MongoStatusStore.from_settings(
            node.crawler.settings, spider.name, node.node_id
        )
        self.statuses = StatusBatches(self.status_store, self.stats, self._stored)
        node.pending.statuses = self.statuses
        logger.info("pages kept for a recrawl go to %s", self.status_store.describe())

    def _stored(self, members: list[bytes], unmarks: list[tuple[str, str]]) -> None:
        self.node.pending.release += members
        self.node.pending.unmark += unmarks

    def before_flush(self) -> None:
        if self.statuses is not None:
            self.statuses.write()

    def heartbeat(self) -> None:
        frontier = self.node.frontier
        if self.status_store is None:
            self._fed(frontier.feed_due(self.feed_batch))
        elif not self._feeding:  # one feed at a time, in a worker thread
            self._feeding = True
            fed = threads.deferToThread(
                self.status_store.feed,
                frontier,
                self.feed_batch,
                self.claim_timeout,
            )
            fed.addBoth(self._fed)

    def _fed(self, result: Any) -> None:
        self._feeding = False
        if isinstance(result, Failure):
            # the claimed pages are due again after RECRAWL_CLAIM_TIMEOUT
            logger.warning("moving due pages into the queue failed: %s", result.getErrorMessage())
            self.stats.inc_value("recrawl/feed_errors")
            return
        if result:
            self.stats.inc_value("recrawl/queued", result)
            self.node.polling.work_found()
            engine.wake(self.node.crawler)

    def close(self) -> None:
        """The last pages' records, before their leases go."""
        if self.statuses is not None:
            self.statuses.write_now()
            self.statuses.closed = True

    def closed(self) -> None:
        if self.statuses is not None:
            self.statuses.close()
