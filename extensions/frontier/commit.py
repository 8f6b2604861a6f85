"""A node's write to the frontier as a value, and the one call that commits it.

What a flush carries (requests to queue, retries to park, finished leases to
release, start entries to acknowledge, the done count, how many requests to
lease after, and each part's section: a crawl's tallies, pages kept for a
recrawl) is one ``FrontierWrite``; ``commit`` writes it and says what went in
(``Committed``).

The lease guarantee lives in ``phases``: a lease leaves Redis only with what its
request produced written, in the same transaction, or in a later round trip
when the frontier is sharded over hash slots (which no transaction spans).

A transaction carries the write's ``mark`` (``NAME:commit:NODE``): when its
answer is lost (a timeout, a server that went away after it ran), the mark says
whether it went in, so it is neither lost nor written twice (``pending.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import redis

from extensions import connection
from extensions.frontier.frontier import Frontier
from extensions.frontier.redisops import execute
from extensions.frontier.results import Added, Entry, Lease
from extensions.frontier.start_urls import StartLeases

if TYPE_CHECKING:
    from extensions.frontier.context import WriteSection

#: the core's parts that write what requests produced, and those that may go
#: only with them or after them (a part's section says its phase)
WRITES = ("enqueue", "delay")
AFTER = ("release", "start_acks", "done", "lease")
#: how long a flush's mark is kept: the node asks for it at its next flush
MARK_TTL_MS = 86_400_000


@dataclass
class FrontierWrite:
    """One flush of a node."""

    #: discovered requests: (fingerprint or "", group, priority, JSON)
    enqueue: list[Entry] = field(default_factory=list)
    #: parked requests (retries, waits): (due, s since epoch; group; JSON)
    delay: list[tuple[float, str, bytes]] = field(default_factory=list)
    #: finished leases (their lease members)
    release: list[bytes] = field(default_factory=list)
    #: start-URL entries whose requests are all queued
    start_acks: list[bytes] = field(default_factory=list)
    #: requests finished (the crawl's done count)
    done: int = 0
    #: requests to lease, after the writes, in the same round trip
    lease: int = 0
    #: the parts' counts the lease script takes besides (``Parts.lease_shares``)
    lease_shares: dict[str, int] = field(default_factory=dict)
    #: written to NAME:commit:NODE in the transaction, when there is one
    mark: str = ""
    #: the parts' sections: {name: (section, what it carries)}
    sections: dict[str, tuple[WriteSection, Any]] = field(default_factory=dict)

    def has(self, part: str) -> bool:
        if part in self.sections:
            return bool(self.sections[part][1])
        return bool(getattr(self, part))

    def parts_of(self, phase: str) -> list[str]:
        """The parts this write carries in that phase ("writes" or "after"), in order."""
        core = WRITES if phase == "writes" else AFTER
        named = [part for part in core if part != "lease" and self.has(part)]
        named += [name for name, (section, payload) in self.sections.items()
                  if section.phase == phase and payload]  # fmt: skip
        if phase == "after" and self.lease:
            named.append("lease")  # last: it reads what the rest wrote
        return named

    @property
    def writes_anything(self) -> bool:
        return bool(self.parts_of("writes")) or any(p != "lease" for p in self.parts_of("after"))


@dataclass
class Committed:
    """What a commit put in Redis."""

    #: the writes (requests queued and parked, the sections of that phase) are in
    writes_in: bool = False
    #: the releases, acknowledgements, the done count and the later sections are in
    rest_in: bool = False
    #: what stopped the commit (the writes or the rest are then not in), if anything
    error: Exception | None = None
    #: the error is Redis refusing an entry (not Redis being away): the writes are
    #: to be done one by one, so one bad entry does not hold back the rest
    bad_input: bool = False
    #: what the enqueue calls did (when the writes are in)
    added: Added | None = None
    #: the leases taken and when the next work is due, if a lease was asked and ran
    leased: tuple[list[Lease], float | None] | None = None
    #: what stopped the lease, if it failed on its own
    lease_error: Exception | None = None
    #: the frontier is sharded: the writes and the rest went in two round trips
    sharded: bool = False
    #: the transaction may have run (its answer never came): its mark says
    unsure: bool = False

    @property
    def writes_settled(self) -> bool:
        """Whether the writes may leave the node's buffers: they are in and, on a
        sharded frontier, so is the rest. A primary that fails over between the two
        round trips may lose writes it acknowledged and had not yet sent to its
        replica; the release then goes to the promoted replica without them. Kept,
        they go again with the release: the dupefilter drops what is queued already
        (a request with no fingerprint may be fetched twice: never lost). When Redis
        refused the rest for what it holds (bad input), the primary is up and has
        the writes: sending them again would only repeat them at every flush."""
        return self.writes_in and (self.rest_in or not self.sharded or self.bad_input)


def phases(write: FrontierWrite, sharded: bool) -> list[list[str]]:
    """The round trips ``write`` goes in, each the list of its parts, in order.

    One slot: everything in one transaction. Sharded: the writes first; the
    releases, acknowledgements, done count and lease once they are all in. No
    part of AFTER is ever in a round trip before the one with the writes.
    """
    writes, after = write.parts_of("writes"), write.parts_of("after")
    if not sharded:
        return [writes + after] if writes or after else []
    return [p for p in (writes, after) if p]


def commit(frontier: Frontier, write: FrontierWrite, lease_timeout: float) -> Committed:
    """Write ``write`` to ``frontier``: see ``phases``. Raises nothing for Redis's
    errors: they are in the result."""
    sharded = frontier.keys.shards > 1
    result = Committed(sharded=sharded)
    plan = phases(write, sharded)
    marked = bool(write.mark) and not sharded
    for index, parts in enumerate(plan):
        last = index == len(plan) - 1
        pipe = frontier.server.pipeline(transaction=not sharded)
        if marked:
            pipe.set(frontier.keys.commit(frontier.node_id), write.mark, px=MARK_TTL_MS)
        calls = _queue_parts(frontier, write, parts, pipe, lease_timeout)
        try:
            outcomes = execute(pipe, raise_on_error=False)
        except redis.RedisError as exc:
            result.error = exc
            result.unsure = marked
            return result
        if marked:
            del outcomes[0]
        lease_outcomes = outcomes[len(outcomes) - calls["lease"] :] if calls["lease"] else []
        if calls["lease"]:
            del outcomes[-calls["lease"] :]
            failed = next((o for o in lease_outcomes if isinstance(o, redis.RedisError)), None)
            if failed is not None:
                result.lease_error = failed
            else:
                result.leased = frontier.lease_result(lease_outcomes)
        refused = next((o for o in outcomes if isinstance(o, redis.RedisError)), None)
        has_writes = any(part in write.parts_of("writes") for part in parts)
        if refused is not None:
            result.error = refused
            result.bad_input = connection.is_bad_input(refused)
            if not sharded and result.bad_input:
                # EXEC ran every other command: only the refused writes are not in
                result.rest_in = True
            return result
        if has_writes:
            result.writes_in = True
            result.added = Added.combine(outcomes[: calls["enqueue"]]) if calls["enqueue"] else None
        if last:
            result.rest_in = True
    if not plan:
        result.writes_in = result.rest_in = True
    return result


def _queue_parts(
    frontier: Frontier, write: FrontierWrite, parts: list[str], pipe: Any, lease_timeout: float
) -> dict[str, int]:
    """Queue ``parts`` of ``write`` on ``pipe``; the number of calls whose
    results are read apart (enqueue first, lease last)."""
    calls = {"enqueue": 0, "lease": 0}
    for part in parts:
        if part == "enqueue":
            calls["enqueue"] = frontier.enqueue_on(pipe, write.enqueue)
        elif part == "delay":
            frontier.delay(write.delay, pipe)
        elif part == "release":
            frontier.release(write.release, pipe)
        elif part == "start_acks":
            leases = StartLeases(frontier.server, frontier.keys, frontier.node_id)
            leases.ack(write.start_acks, pipe)
        elif part == "done":
            pipe.hincrby(frontier.keys.checkpoint, "done", write.done)
        elif part == "lease":
            calls["lease"] = frontier.lease_on(pipe, write.lease, lease_timeout, write.lease_shares)
        else:
            section, payload = write.sections[part]
            section.queue(payload, frontier, pipe)
    return calls


def write_one_by_one(
    frontier: Frontier, enqueue: list[Entry], delay: list[tuple[float, str, bytes]]
) -> tuple[list[Entry], list[tuple[float, str, bytes]], list[tuple[Any, Exception]]]:
    """Write each request and parked request alone, after Redis refused one of a
    batch: (those to try again, at the next flush: a server-side error; those
    to try again among the parked; those Redis refuses, with its error)."""
    kept_enqueue: list[Entry] = []
    kept_delay: list[tuple[float, str, bytes]] = []
    refused: list[tuple[Any, Exception]] = []
    parts: tuple[tuple[list[Any], Any, list[Any]], ...] = (
        (enqueue, frontier.enqueue, kept_enqueue),
        (delay, frontier.delay, kept_delay),
    )
    for entries, write, kept in parts:
        for entry in entries:
            try:
                write([entry])
            except redis.ResponseError as exc:
                if connection.is_bad_input(exc):
                    refused.append((entry, exc))
                else:
                    kept.append(entry)
            except redis.RedisError:
                kept.append(entry)
    return kept_enqueue, kept_delay, refused
