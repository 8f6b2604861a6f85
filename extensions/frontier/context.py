"""What a frontier part is given: the crawl's Redis, its keys, this node, and
the named points where a capability meets the core.

A part never holds the node: what it may read is here, typed, and what it may
add to the core's path is one of the extension points, each a list the core
runs at its place:

* admission checks and deciders (``check_admitted``, ``decide_admitted``): a
  request's problem, which dead-letters it, and what a part marks on it; checks
  of the requests built from a start entry alone (``check_start_entries``: what
  a person pushed, read where a spider's own request would mean something else);
* lease checks (``check_leased``): a leased request a part drops before the
  engine is given it (a crawl's scope changed since it was queued);
* release gates (``gate_releases``): a finished request's lease a part releases
  itself, later, once what it must keep of the page is durable (``release``);
* write sections (``write_with_flush``): what a part writes in the flush's
  transaction, in the round trip of the writes or with the releases;
* heartbeat registries (``beat_into``): sorted sets this node's heartbeats go
  into besides the node registry (render nodes, say).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

if TYPE_CHECKING:
    import redis
    from redis.client import Pipeline
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings
    from scrapy.statscollectors import StatsCollector

    from extensions.connection import RedisHealth
    from extensions.frontier.frontier import Frontier
    from extensions.keys import SpiderKeys

#: a request's problem (it is dead-lettered with it), or None
AdmissionCheck = Callable[["Request"], "str | None"]
#: marks an admitted request (its meta) before it is fingerprinted and stored
AdmissionDecider = Callable[["Request"], None]
#: why a leased request must not be fetched now (it is dropped, its lease
#: released, and the check counts it), or None
LeaseCheck = Callable[["Request"], "str | None"]


class ReleaseGate(Protocol):
    def take(self, request: Request, member: bytes) -> bool:
        """Whether the gate keeps this finished request's lease, to release it
        itself (``PartContext.release``); False: the next flush releases it."""
        ...

    def held(self) -> Iterable[bytes]:
        """The lease members the gate keeps now."""
        ...


class WriteSection:
    """A part's share of a flush. ``phase`` says which round trip it goes in on
    a sharded frontier: "writes" (what requests produced, before any release)
    or "after" (with the releases). What did not go in is owed again."""

    name: ClassVar[str]
    phase: ClassVar[str] = "after"

    def take(self, parked_groups: list[str]) -> Any:
        """What this flush carries (falsy: nothing), taken out of what is owed.
        ``parked_groups``: the groups of the retries the flush parks."""
        return None

    def queue(self, payload: Any, frontier: Frontier, pipe: Pipeline) -> None:
        """Queue the writes on the flush's pipeline."""

    def kept(self, payload: Any) -> None:
        """The payload did not go in: owed again, before what came since."""


@dataclass
class ExtensionPoints:
    """The lists the core runs, which parts add to through the context."""

    admission_checks: list[AdmissionCheck] = field(default_factory=list)
    start_entry_checks: list[AdmissionCheck] = field(default_factory=list)
    admission_deciders: list[AdmissionDecider] = field(default_factory=list)
    lease_checks: list[LeaseCheck] = field(default_factory=list)
    release_gates: list[ReleaseGate] = field(default_factory=list)
    write_sections: list[WriteSection] = field(default_factory=list)
    beat_registries: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class PartContext:
    crawler: Crawler
    settings: BaseSettings
    server: redis.Redis
    keys: SpiderKeys
    node_id: str
    stats: StatsCollector
    health: RedisHealth
    #: the crawl's shared operations (its shards, the lease's host notes)
    frontier: Frontier
    spider: Spider
    #: look in Redis again now (a part that held the lease has room again)
    wake: Callable[[], None]
    #: something is due in that many seconds: look then, whatever the back-off says
    look_again_in: Callable[[float], None]
    #: new work is in the queue: no back-off, the engine woken
    work_found: Callable[[], None]
    #: a record for the dead-letter list (kind, url, error, ...)
    dead_letter: Callable[..., None]
    #: lease members to release at the next flush (a gate's, or a part's own)
    release: Callable[[Iterable[bytes]], None]
    #: a lease call begun at that ms time failed after it may have run
    lease_failed: Callable[[int], None]
    points: ExtensionPoints

    def check_admitted(self, check: AdmissionCheck) -> None:
        self.points.admission_checks.append(check)

    def check_start_entries(self, check: AdmissionCheck) -> None:
        self.points.start_entry_checks.append(check)

    def decide_admitted(self, decider: AdmissionDecider) -> None:
        self.points.admission_deciders.append(decider)

    def check_leased(self, check: LeaseCheck) -> None:
        self.points.lease_checks.append(check)

    def gate_releases(self, gate: ReleaseGate) -> None:
        self.points.release_gates.append(gate)

    def write_with_flush(self, section: WriteSection) -> None:
        self.points.write_sections.append(section)

    def beat_into(self, registry: str) -> None:
        self.points.beat_registries.append(registry)
