"""What a node owes the frontier until its next flush.

The scheduler hands its writes here as requests come and go: discovered
requests to queue, retries and waits to park, finished leases to release and
the done count; the parts add their sections (``context.WriteSection``) and
may keep a finished lease to release it themselves (``context.ReleaseGate``).
``write`` turns them into one ``FrontierWrite``; ``settle`` takes out what the
commit put in, so what did not go in waits for the next flush and nothing is
written twice.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from extensions.frontier.commit import Committed, FrontierWrite, write_one_by_one
from extensions.meta import DEAD_LETTERED

if TYPE_CHECKING:
    from scrapy import Request

    from extensions.frontier.context import ReleaseGate, WriteSection
    from extensions.frontier.frontier import Frontier
    from extensions.frontier.results import Entry

logger = logging.getLogger(__name__)


@dataclass
class UnsureWrite:
    """A flush whose answer was lost: it went in or not, as its mark in Redis says."""

    write: FrontierWrite
    #: the done count it carried, as it was before it was built
    done: int


class PendingWrites:
    def __init__(
        self,
        sections: list[WriteSection] | None = None,
        gates: list[ReleaseGate] | None = None,
    ):
        self.enqueue: list[Entry] = []
        #: parked requests (retries, waits): (due, s since epoch; group; JSON)
        self.delay: list[tuple[float, str, bytes]] = []
        self.release: list[bytes] = []
        #: Requests finished since the last flush, less those that went to the
        #: dead-letter queue; parked copies (retries, waits) are subtracted when
        #: written, as the same request is then still to be done.
        self.done = 0
        #: the parts' shares of each flush, and their hold on finished leases
        self.sections: list[WriteSection] = sections if sections is not None else []
        self.gates: list[ReleaseGate] = gates if gates is not None else []
        #: a flush that may have gone in, set apart until its mark is read: nothing
        #: is written before (a lease may be released only after its writes)
        self.unsure: UnsureWrite | None = None
        #: finished leases several gates keep: how many more must release each
        self._holds: dict[bytes, int] = {}

    def unwritten(self) -> bool:
        return bool(self.enqueue or self.delay or self.release or self.unsure)

    def unsure_releases(self) -> list[bytes]:
        return self.unsure.write.release if self.unsure else []

    def release_later(self, members: Iterable[bytes]) -> None:
        """Leases a part releases (a gate's, once what it kept is durable); one
        that several gates keep goes once the last of them releases it."""
        for member in members:
            others = self._holds.get(member)
            if others:
                self._holds[member] = others - 1
                continue
            self._holds.pop(member, None)
            self.release.append(member)

    def gated(self) -> list[bytes]:
        """The finished leases the parts' gates keep."""
        return [member for gate in self.gates for member in gate.held()]

    def set_apart(self, write: FrontierWrite) -> None:
        """``write`` may have gone in (its answer was lost): what it carried is
        no longer owed, until ``resolve`` says."""
        self.unsure = UnsureWrite(write, self.done)
        self.enqueue, self.delay, self.release = [], [], []
        self.done = 0

    def resolve(self, went_in: bool) -> list[bytes]:
        """The unsure write went in (forgotten) or not (owed again, before what
        came since); the start-URL acknowledgements to put back."""
        unsure, self.unsure = self.unsure, None
        if unsure is None or went_in:
            return []
        write = unsure.write
        self.enqueue = write.enqueue + self.enqueue
        self.delay = write.delay + self.delay
        self.release = write.release + self.release
        self.done += unsure.done
        for section, payload in write.sections.values():
            if payload:
                section.kept(payload)
        return write.start_acks

    def finish(self, request: Request, member: bytes) -> None:
        """A leased request the engine is done with: its lease to release (unless
        a part's gate keeps it until what it must keep is durable), and its done
        count."""
        holders = sum(gate.take(request, member) for gate in self.gates)  # each gate asked
        if not holders:
            self.release.append(member)
        elif holders > 1:
            self._holds[member] = holders - 1
        if not request.meta.get(DEAD_LETTERED):
            self.done += 1

    def write(
        self, start_acks: list[bytes], lease: int, lease_shares: dict[str, int]
    ) -> FrontierWrite:
        parked = [group for _, group, _ in self.delay]
        return FrontierWrite(
            enqueue=self.enqueue,
            delay=self.delay,
            release=self.release,
            start_acks=start_acks,
            done=self.done - len(self.delay),
            lease=lease,
            lease_shares=lease_shares,
            sections={section.name: (section, section.take(parked)) for section in self.sections},
        )

    def settle(self, write: FrontierWrite, result: Committed) -> None:
        """Take out what went in (written again, what is queued already counts
        as filtered: the caller counts ``result.added``)."""
        if result.writes_settled:
            self.enqueue, self.delay = [], []
        if result.rest_in:
            self.release, self.done = [], 0
        for section, payload in write.sections.values():
            went_in = result.rest_in or (section.phase == "writes" and result.writes_settled)
            if payload and not went_in:
                section.kept(payload)

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
