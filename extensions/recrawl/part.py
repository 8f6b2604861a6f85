"""Recrawls in a node's frontier: each heartbeat, pages due for a recrawl go back
into the queue (any node, each once); a fetched page kept for a recrawl has its
record written with the flush that releases its lease (``RevisitSection``), or,
with ``RECRAWL_STORE = "mongo"``, to MongoDB first: only once it has them are
their leases released (the part's gate keeps them until then), their queued
marks forgotten with the release (``UnmarkSection``)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from twisted.internet import threads
from twisted.python.failure import Failure

from extensions.frontier.context import WriteSection
from extensions.frontier.part import FrontierPart, StatusView
from extensions.meta import DEAD_LETTERED
from extensions.recrawl.redisstore import RecrawlStore
from extensions.recrawl.revisits import revisits_for
from extensions.recrawl.statuses import StatusBatches
from extensions.recrawl.statusstore import MongoStatusStore, store_kind

if TYPE_CHECKING:
    from redis.client import Pipeline
    from scrapy import Request, Spider

    from extensions.frontier.context import PartContext
    from extensions.frontier.frontier import Frontier
    from extensions.recrawl.revisits import RevisitEntry

logger = logging.getLogger(__name__)


class _Owed(WriteSection):
    """A list of entries written with a flush; kept in order when it does not go in."""

    def __init__(self, store: RecrawlStore) -> None:
        self.store = store
        self.entries: list[Any] = []

    def take(self, parked_groups: list[str]) -> list[Any]:
        taken, self.entries = self.entries, []
        return taken

    def kept(self, payload: list[Any]) -> None:
        self.entries = payload + self.entries


class RevisitSection(_Owed):
    """Pages kept for a recrawl: written with what their request produced."""

    name = "revisit"
    phase = "writes"

    def queue(self, payload: list[RevisitEntry], frontier: Frontier, pipe: Pipeline) -> None:
        self.store.revisit(payload, pipe)


class UnmarkSection(_Owed):
    """(fingerprint, group) of pages whose record the status store took: their
    queued mark goes with the release of their lease."""

    name = "unmark"
    phase = "after"

    def queue(self, payload: list[tuple[str, str]], frontier: Frontier, pipe: Pipeline) -> None:
        self.store.unmark(payload, pipe)


class RecrawlPart(FrontierPart):
    figures = {"recrawl": "kept for a recrawl", "due": "recrawls due"}

    def __init__(self, context: PartContext):
        self.context = context
        self.stats = context.stats
        settings = context.settings
        self.store_kind = store_kind(settings)
        self.feed_batch = settings.getint("RECRAWL_FEED_BATCH")
        self.claim_timeout = settings.getfloat("RECRAWL_CLAIM_TIMEOUT")
        self.kept = RecrawlStore(context.frontier)
        self.revisits = revisits_for(context.crawler)
        # (built once: a RecrawlStore registers its scripts, hashing them)
        self.revisit_section = RevisitSection(self.kept)
        self.unmark_section = UnmarkSection(self.kept)
        #: RECRAWL_STORE = "mongo": the store, and the finished requests whose
        #: revisit record it has yet to take (their leases wait for it)
        self.status_store: MongoStatusStore | None = None
        self.statuses: StatusBatches | None = None
        self._feeding = False
        context.write_with_flush(self.revisit_section)
        context.write_with_flush(self.unmark_section)
        context.gate_releases(self)

    @classmethod
    def from_context(cls, context: PartContext) -> RecrawlPart:
        return cls(context)

    @classmethod
    def status(cls, view: StatusView) -> dict[str, Any]:
        """The pages kept for a recrawl, those due now and in each hour ahead."""
        kept = view.status_store or RecrawlStore(view.frontier)
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
        context = self.context
        self.status_store = MongoStatusStore.from_settings(
            context.settings, spider.name, context.node_id
        )
        self.statuses = StatusBatches(self.status_store, self.stats, self._stored)
        logger.info("pages kept for a recrawl go to %s", self.status_store.describe())

    # --- the gate on finished leases ---------------------------------------------

    def take(self, request: Request, member: bytes) -> bool:
        """A finished page kept for a recrawl: its record goes with its release,
        or, kept outside Redis, to the store first (its lease is kept till then)."""
        revisit = self.revisits.pending.pop(request, None)
        if callable(revisit):  # waiting for items the callback never finished
            revisit = revisit()
            self.revisits.pending.pop(request, None)
        elif revisit is None and request.meta.get(DEAD_LETTERED):
            revisit = self.revisits.after_failure(request)  # a kept page stays kept
            self.revisits.pending.pop(request, None)
        if revisit is None:
            return False
        if self.statuses is not None:
            self.statuses.add(member, revisit)  # released once stored
            return True
        self.revisit_section.entries.append(revisit)
        return False

    def held(self) -> Iterable[bytes]:
        if self.statuses is None:
            return ()
        return [member for member, _ in self.statuses.pending + self.statuses.in_flight]

    def _stored(self, members: list[bytes], unmarks: list[tuple[str, str]]) -> None:
        self.context.release(members)
        self.unmark_section.entries += unmarks

    # --- the node's turns ----------------------------------------------------------

    def before_flush(self) -> None:
        if self.statuses is not None:
            self.statuses.write()

    def heartbeat(self) -> None:
        if self.status_store is None:
            self._fed(self.kept.feed_due(self.feed_batch))
        elif not self._feeding:  # one feed at a time, in a worker thread
            self._feeding = True
            fed = threads.deferToThread(
                self.status_store.feed, self.kept, self.feed_batch, self.claim_timeout
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
            self.context.work_found()

    def close(self) -> None:
        """The last pages' records, before their leases go."""
        if self.statuses is not None:
            self.statuses.write_now()
            self.statuses.closed = True

    def closed(self) -> None:
        if self.statuses is not None:
            self.statuses.close()
