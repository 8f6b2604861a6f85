"""What the frontier's operations answer: leases, what an enqueue did, what a
reclaim gave back, and the frontier's sizes."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple

from extensions import connection
from extensions.frontier import redisops

#: (fingerprint or "" for dont_filter, group, priority, request JSON or b"")
Entry = tuple[str | bytes, str, float, bytes]


@dataclass
class LeaseTally:
    """What the leases met since the last look: malformed host fields ignored
    (another writer's), ready hosts left to the node that holds them, and
    requests of such hosts taken for want of other work (host affinity)."""

    bad_host_fields: int = 0
    left_to_owners: int = 0
    taken_over: int = 0

    def add(self, named: dict[str, Any]) -> None:
        """Add one lease call's result (by name)."""
        self.bad_host_fields += int(named["bad"])
        left, taken_over = named.get("affinity") or (0, 0)
        self.left_to_owners += int(left)
        self.taken_over += int(taken_over)


class Lease(NamedTuple):
    """One leased request: its lease member (GROUP newline ID), its JSON, the
    time (s since epoch) it may be sent (0: at once) and the seconds after it
    it may still go, and whether its group is watched (it pushed back: its
    good answers are reported, so its rate climbs again)."""

    member: bytes
    data: bytes
    slot: float = 0.0
    window: float = 0.0
    watched: bool = False
    #: a sharded frontier's levels (lease.lua levels_apart): 'DOMAIN ADDRESS
    #: HOST_INTERVAL_MS', for the node to claim their slots; b"" for none
    claim: bytes = b""


#: hosts waiting to be described at most (the leases ask again for the rest)
MAX_UNDESCRIBED = 10_000


@dataclass
class HostNotes:
    """What the leases said of hosts for the levels above them (CLUSTER_DOMAIN_RATE,
    CLUSTER_IP_RATE; hosts/levels.py takes them): hosts whose domain and address
    are to be written, and leases of hosts with no address, to be dead-lettered
    (lease member, its JSON, why), not fetched."""

    undescribed: set[str] = field(default_factory=set)
    unresolvable: list[tuple[bytes, bytes, str]] = field(default_factory=list)

    def read(self, named: dict[str, Any]) -> dict[bytes, str]:
        """Take one lease call's notes; the groups with no address, with why."""
        room = max(MAX_UNDESCRIBED - len(self.undescribed), 0)
        self.undescribed.update(connection.text(host) for host in named["describe"][:room])
        pairs = named["unresolvable"]
        return {pairs[i]: connection.text(pairs[i + 1]) for i in range(0, len(pairs) - 1, 2)}


def leases_of(named: dict[str, Any], notes: HostNotes) -> list[Lease]:
    """The leases of one lease call's result (by name), less those of hosts with
    no address (into ``notes``, to be dead-lettered)."""
    unresolvable = notes.read(named)
    watched = set(named["watched"])
    claims = named["levels"]
    leased = []
    for member, item, paced, claim in zip(
        named["leases"], named["data"], named["slots"], claims, strict=True
    ):
        slot, _, window = paced.partition(b":")
        group = member.partition(b"\n")[0]
        if group in unresolvable:
            notes.unresolvable.append((member, item, unresolvable[group]))
            continue
        leased.append(
            Lease(member, item, int(slot) / 1000, int(window or 0) / 1000, group in watched, claim)
        )
    return leased


@dataclass(frozen=True)
class Added:
    """What an enqueue did: fingerprints that were new, and of those, the group
    of each request dropped because its group had used its HOST_PAGE_BUDGET."""

    new: int
    over_budget: tuple[str, ...] = ()
    #: requests dropped because their crawl had used its budget
    over_crawl_budget: int = 0

    @classmethod
    def of(cls, result: Any) -> Added:
        """From an enqueue script's result (by name: new, over_budget, over_crawl_budget)."""
        named = redisops.fields(result)
        return cls(
            int(named["new"]),
            tuple(connection.text(group) for group in named["over_budget"]),
            int(named["over_crawl_budget"]),
        )

    @classmethod
    def combine(cls, results: list[Any]) -> Added:
        """What the enqueue calls of one batch (one per shard) did together."""
        parts = [cls.of(result) for result in results]
        return cls(
            sum(p.new for p in parts),
            tuple(g for p in parts for g in p.over_budget),
            sum(p.over_crawl_budget for p in parts),
        )


def counts_of(flat: list) -> dict[str, int]:
    return {
        connection.text(node): int(count) for node, count in zip(flat[::2], flat[1::2], strict=True)
    }


@dataclass(frozen=True)
class Reclaimed:
    """What a reclaim gave back, per node: requests to the queue, start-URL
    entries to the start list."""

    requests: dict[str, int]
    start_urls: dict[str, int]

    def __bool__(self) -> bool:
        return bool(self.requests or self.start_urls)


@dataclass(frozen=True)
class FrontierSizes:
    start_urls: int
    queued: int
    in_flight: int
    seen: int
    dlq: int
    delayed: int
    #: queue groups (hosts) with work, and those of them that may be leased now
    hosts: int = 0
    ready_hosts: int = 0
    #: hosts held because they pushed back (backing off), and of them, for a ban
    held_hosts: int = 0
    banned_hosts: int = 0
    #: of the queued requests, those waiting for a render node (render lane)
    render_queued: int = 0
    #: of the queued requests, those out of Redis (FRONTIER_OVERFLOW: in MongoDB or
    #: on their way there)
    spilled: int = 0

    @property
    def pending(self) -> int:
        """Work the cluster still has to do (start URLs, queue, in flight, retries)."""
        return self.start_urls + self.queued + self.in_flight + self.delayed

    def recorded(self) -> dict[str, int]:
        """What a heartbeat records of them in NAME:checkpoint."""
        return {"queued": self.queued, "in_flight": self.in_flight, "delayed": self.delayed,
                "dlq": self.dlq, "seen": self.seen, "start_urls": self.start_urls}  # fmt: skip


#: the sizes by name, as frontier.lua returns them
SIZE_FIELDS = tuple(field.name for field in fields(FrontierSizes))
