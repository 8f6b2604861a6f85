"""What a node owes the frontier until its next flush.

The scheduler hands its writes here as requests come and go: discovered
requests to queue, retries and waits to park, pages to revisit, finished leases
to release and their done counts. ``write`` turns them into one
``FrontierWrite``; ``settle`` takes out what the commit put in, so what did not
go in waits for the next flush and nothing is written twice.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from extensions.frontier.commit import Committed, FrontierWrite, write_one_by_one
from extensions.frontier.crawls.state import CrawlTally
from extensions.meta import CRAWL_ID, DEAD_LETTERED

if TYPE_CHECKING:
    from scrapy import Request

    from extensions.frontier.frontier import Frontier
    from extensions.frontier.recrawls.statuses import StatusBatches
    from extensions.frontier.results import Entry
    from extensions.recrawl.revisits import RevisitEntry, Revisits

logger = logging.getLogger(__name__)


@dataclass
class UnsureWrite:
    """A flush whose answer was lost: it went in or not, as its mark in Redis says."""

    write: FrontierWrite
    #: the done counts it carried, as they were before it was built
    done: int
    crawl_done: dict[str, int]


class PendingWrites:
    def __init__(self, crawl_items: dict[str, int]):
        self.enqueue: list[Entry] = []
        #: parked requests (retries, waits): (due, s since epoch; group; JSON)
        self.delay: list[tuple[float, str, bytes]] = []
        #: pages to fetch again (RECRAWL_AFTER), written with the release of their lease
        self.revisit: list[RevisitEntry] = []
        self.release: list[bytes] = []
        #: pages whose queued mark goes with the release of their lease (their
        #: status is in the store outside Redis)
        self.unmark: list[tuple[str, str]] = []
        #: Requests finished since the last flush, less those that went to the
        #: dead-letter queue; parked copies (retries, waits) are subtracted when
        #: written, as the same request is then still to be done.
        self.done = 0
        #: the same per crawl under an id, and their items
        self.tally = CrawlTally(crawl_items)
        #: RECRAWL_STORE = "mongo": where kept pages' records go before their leases
        #: (the recrawl part's)
        self.statuses: StatusBatches | None = None
        #: a flush that may have gone in, set apart until its mark is read: nothing
        #: is written before (a lease may be released only after its writes)
        self.unsure: UnsureWrite | None = None

    def unwritten(self) -> bool:
        return bool(self.enqueue or self.delay or self.release or self.unsure)

    def unsure_releases(self) -> list[bytes]:
        return self.unsure.write.release if self.unsure else []

    def set_apart(self, write: FrontierWrite) -> None:
        """``write`` may have gone in (its answer was lost): what it carried is
        no longer owed, until ``resolve`` says."""
        self.unsure = UnsureWrite(write, self.done, dict(self.tally.done))
        self.enqueue, self.delay, self.revisit, self.release, self.unmark = [], [], [], [], []
        self.done = 0
        self.tally.written()

    def resolve(self, went_in: bool) -> list[bytes]:
        """The unsure write went in (forgotten) or not (owed again, before what
        came since); the start-URL acknowledgements to put back."""
        unsure, self.unsure = self.unsure, None
        if unsure is None or went_in:
            return []
        write = unsure.write
        self.enqueue = write.enqueue + self.enqueue
        self.delay = write.delay + self.delay
        self.revisit = write.revisit + self.revisit
        self.release = write.release + self.release
        self.unmark = write.unmark + self.unmark
        self.done += unsure.done
        for crawl, done in unsure.crawl_done.items():
            self.tally.done[crawl] = self.tally.done.get(crawl, 0) + done
        self.tally.keep_items(write.crawl_counts)
        return write.start_acks

    def finished(self, crawl: str | None) -> None:
        self.done += 1
        self.tally.finished(crawl)

    def finish(self, request: Request, member: bytes, revisits: Revisits) -> None:
        """A leased request the engine is done with: its lease to release, with
        its revisit record when the page is kept (after the status store took
        the record, when it is outside Redis), and its done count."""
        revisit = revisits.pending.pop(request, None)
        if callable(revisit):  # waiting for items the callback never finished
            revisit = revisit()
            revisits.pending.pop(request, None)
        elif revisit is None and request.meta.get(DEAD_LETTERED):
            revisit = revisits.after_failure(request)  # a kept page stays kept
            revisits.pending.pop(request, None)
        if revisit is None:
            self.release.append(member)
        elif self.statuses is not None:
            self.statuses.add(member, revisit)  # released once stored
        else:
            self.release.append(member)
            self.revisit.append(revisit)
        if not request.meta.get(DEAD_LETTERED):
            self.finished(request.meta.get(CRAWL_ID))

    def write(self, start_acks: list[bytes], lease: int, render_lease: int) -> FrontierWrite:
        return FrontierWrite(
            enqueue=self.enqueue,
            delay=self.delay,
            revisit=self.revisit,
            release=self.release,
            unmark=self.unmark,
            start_acks=start_acks,
            done=self.done - len(self.delay),
            crawl_counts=self.tally.take(group for _, group, _ in self.delay),
            lease=lease,
            render_lease=render_lease,
        )

    def settle(self, write: FrontierWrite, result: Committed) -> None:
        """Take out what went in (written again, what is queued already counts
        as filtered: the caller counts ``result.added``)."""
        if result.writes_settled:
            self.enqueue, self.delay, self.revisit = [], [], []
        if result.rest_in:
            self.release, self.revisit, self.unmark, self.done = [], [], [], 0
            self.tally.written()
        else:
            self.tally.keep_items(write.crawl_counts)

    def write_one_by_one(
        self,
        frontier: Frontier,
        write: FrontierWrite,
        first_error: Exception,
        dead_letter: Callable[..., Any],
    ) -> int:
        """Write each new request and retry alone; those Redis refuses are
        dead-lettered, those that meet a server-side error wait for the next
        flush. Returns how many were refused."""
        logger.error("Redis refused a write (%s); writing entries one by one", first_error)
        self.enqueue, self.delay, refused = write_one_by_one(frontier, write.enqueue, write.delay)
        for entry, exc in refused:
            dead_letter(
                kind="refused_by_redis",
                url="",
                error=f"Redis refused the entry: {exc}",
                raw=entry[-1].decode("utf-8", "replace")[:10_000],
            )
        return len(refused)
