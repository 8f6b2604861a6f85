"""Finished pages' revisit records on their way to the status store outside
Redis (``RECRAWL_STORE = "mongo"``): written in a worker thread, and only once
the store has them are the pages' leases released, with their queued marks."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from twisted.internet import threads

if TYPE_CHECKING:
    from extensions.recrawl.revisits import RevisitEntry
    from extensions.recrawl.statusstore import MongoStatusStore

logger = logging.getLogger(__name__)

#: (lease member, the page's revisit record)
Pending = tuple[bytes, "RevisitEntry"]
#: called with the members whose records are stored, and their (fingerprint, group)
Stored = Callable[[list[bytes], list[tuple[str, str]]], None]


class StatusBatches:
    def __init__(self, store: MongoStatusStore, stats: Any, on_stored: Stored):
        self.store = store
        self.stats = stats
        self.on_stored = on_stored
        self.pending: list[Pending] = []
        self.in_flight: list[Pending] = []  # the batch a worker thread is writing now
        self.closed = False

    def add(self, member: bytes, revisit: RevisitEntry) -> None:
        self.pending.append((member, revisit))

    def write(self) -> None:
        """Hand the pending records to the store in a worker thread, one batch at a time."""
        if not self.pending or self.in_flight:
            return
        batch, self.pending = self.pending, []
        self.in_flight = batch
        written = threads.deferToThread(self.store.write, [entry for _, entry in batch])
        written.addCallback(self._written, batch)
        written.addErrback(self._not_written, batch)

    def write_now(self) -> None:
        """At close, here: a batch still in its thread is written again (the same
        $set: writing it twice changes nothing) rather than its pages fetched
        again because their leases were handed back."""
        batch = self.in_flight + self.pending
        self.pending = []
        if not batch:
            return
        from pymongo.errors import PyMongoError

        try:
            self.store.write([entry for _, entry in batch])
        except PyMongoError as exc:
            logger.error("could not store %d pages' recrawl status: %s", len(batch), exc)
            return  # their leases stay: the pages are fetched and stored again
        self._stored(batch)

    def close(self) -> None:
        self.closed = True
        self.store.close()

    def _stored(self, batch: list[Pending]) -> None:
        self.in_flight = []
        self.on_stored(
            [member for member, _ in batch],
            [(fingerprint, group) for _, (fingerprint, group, _, _) in batch],
        )
        self.stats.inc_value("recrawl/stored", len(batch))

    def _written(self, _: Any, batch: list[Pending]) -> None:
        if not self.closed:  # else written again, and released, at close
            self._stored(batch)

    def _not_written(self, failure: Any, batch: list[Pending]) -> None:
        if self.closed:
            return  # the store closed under the thread; the batch was written at close
        self.in_flight = []
        self.pending = batch + self.pending  # tried again at the next flush
        self.stats.inc_value("recrawl/store_errors")
        logger.error(
            "could not store %d pages' recrawl status (%s); trying again",
            len(batch),
            failure.getErrorMessage(),
        )
