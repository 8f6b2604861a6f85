"""The shared Redis frontier: queue, dupefilter, leases and node registry.

A request taken from the queue is leased to its node, not deleted: it stays in
``NAME:leases:NODE`` until the node releases it after the response was handled.
If the node dies, its heartbeat goes stale and any other node returns its
leases to the queue. Every multi-key change is one Lua script (``scripts/``).
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import redis

from extensions import connection, defaults
from extensions.cluster.checkpoint import now_ms
from extensions.crawlid import crawls_of
from extensions.frontier.leaseplan import LeasePlanner
from extensions.frontier.manifest import Manifest
from extensions.frontier.redisops import execute, fields, run_named
from extensions.frontier.results import (
    SIZE_FIELDS,
    Added,
    Entry,
    FrontierSizes,
    HostNotes,
    Lease,
    LeaseTally,
    Reclaimed,
    counts_of,
    leases_of,
)
from extensions.keys import SpiderKeys

if TYPE_CHECKING:
    from redis.client import Pipeline
    from redis.commands.core import Script

    from extensions.frontier.bloom import BloomParams

logger = logging.getLogger(__name__)
T = TypeVar("T")

#: seconds of a rate-limited group's requests one lease may hand out at once
RATE_BURST_SECONDS = 0.05
#: ms before its next slot a paced group may be leased, so that its request is
#: at the node when the slot comes (a lease's round trip and the engine's turn)
LEASE_LEAD_MS = 100

# Bytes of Scrapy's request fingerprint the exact dupefilter keeps: 2 name the
# bucket, 12 are stored; 112 bits leave no collision to fear.
FINGERPRINT_BYTES = 14

RECLAIM_BATCH = 2000  # leases one reclaim call returns at most
RECLAIM_CALLS = 1000  # calls one reclaim makes at most (2M leases); the next beat goes on
HEARTBEAT_SHARDS = 16  # shards a heartbeat reads sizes from and reclaims in


class ScriptArgs(Protocol):
    """A part's arguments for the frontier's scripts, per shard."""

    def args(self, keys: SpiderKeys) -> dict[str, Any]: ...


class Frontier:
    """Redis operations on one spider's frontier, for one node."""

    def __init__(
        self,
        server: redis.Redis,
        keys: SpiderKeys,
        node_id: str,
        bloom: BloomParams | None = None,
        *,
        budget: int | ScriptArgs = 0,
        crawl_delay_max: float = defaults.CLUSTER_CRAWL_DELAY_MAX,
        send_tolerance: float = defaults.CLUSTER_SEND_TOLERANCE,
        host_affinity: float = defaults.FRONTIER_HOST_AFFINITY,
        node_timeout: float = defaults.NODE_TIMEOUT,
    ):
        self.server = server
        self.budget = budget
        self.crawl_delay_max = crawl_delay_max
        self.send_tolerance = send_tolerance
        self.host_affinity_ms = int(host_affinity * 1000)
        self.node_timeout_ms = int(node_timeout * 1000)
        self.tally = LeaseTally()  # what the leases met since the last look
        self.host_notes = HostNotes()  # for the levels above hosts (hosts/levels.py)
        self.keys = keys
        self.node_id = node_id
        self.bloom = bloom
        self.leases_key = keys.leases(node_id)
        #: the crawl's scripts, with the pieces its manifest names
        self.manifest = Manifest(server, keys)
        self.reclaim_batch = RECLAIM_BATCH
        self._bloom_ready: set[str] = set()  # the bitmaps known to exist, by prefix
        self.shards = keys.all_shards()  # each shard's keys, built once
        self._planner = LeasePlanner(len(self.shards))
        self._asked: list[int] = []  # the shards the last lease asked, in order
        self._round_start: dict[str, int] = {}  # the next heartbeat's first shard
        self._scope_sizes: dict[int, dict[str, int]] = {}  # sizes() per scope, last read

    def _budget_args(self, keys: SpiderKeys) -> dict[str, Any]:
        """A fixed HOST_PAGE_BUDGET, or the arguments of one that depends on the
        host (HOST_BUDGET_BY_RANK: ``ranks.state.RankBudget``)."""
        if isinstance(self.budget, int):
            return {"budget": self.budget}
        return self.budget.args(keys)

    def by_shard(self, items: Sequence[T], group_of: Callable[[T], str]) -> dict[int, list[T]]:
        parts: dict[int, list[T]] = {}
        for item in items:
            parts.setdefault(self.keys.shard_of(group_of(item)), []).append(item)
        return parts

    def enqueue(self, entries: list[Entry]) -> Added:
        """Add (fingerprint, group, priority, data) entries to their groups' queues.

        A fingerprint is Scrapy's (at least 16 bytes), or empty for dont_filter;
        empty data only records the fingerprint. Returns what was new and what
        went over HOST_PAGE_BUDGET.
        """
        pipe = self.server.pipeline(transaction=False)
        self.enqueue_on(pipe, entries)
        return Added.combine(execute(pipe))

    def enqueue_on(self, pipe: Pipeline, entries: list[Entry]) -> int:
        """``enqueue``, queued on ``pipe``: one call per shard, whose number is
        returned (``Added.combine`` reads their results from ``execute(pipe)``)."""
        parts = self.by_shard(entries, lambda entry: entry[1])
        self._planner.mark_hot(parts)
        for shard, part in parts.items():
            self._enqueue_shard(self.shards[shard], part, pipe)
        return len(parts)

    def _enqueue_shard(self, keys: SpiderKeys, entries: list[Entry], pipe: Pipeline | None = None):
        args: dict[str, Any] = {"queue_prefix": keys.queue(""), "host_prefix": keys.host(""),
                                "data_prefix": keys.data(""),
                                **self._budget_args(keys)}  # fmt: skip
        items: list[str | float | bytes | int] = []
        if self.bloom is None:
            args["level_prefix"] = keys.dupefilter + ":"  # its levels' buckets
            for fingerprint, group, priority, data in entries:
                items.extend((fingerprint[:FINGERPRINT_BYTES], group, priority, data))
            script, counted = self.manifest.script("enqueue"), {"dupefilter": keys.dupefilter}
        else:
            self._create_bloom_shards(keys)
            args.update(bloom_prefix=keys.bloom_prefix, k=self.bloom.hashes)
            for fingerprint, group, priority, data in entries:
                if fingerprint:
                    raw = fingerprint if isinstance(fingerprint, bytes) else fingerprint.encode()
                    shard, offsets = self.bloom.positions(raw)
                    items.append(shard)
                    items.extend(offsets)
                else:  # dont_filter: no check, same stride
                    items.extend([""] * (self.bloom.hashes + 1))
                items.extend((group, priority, data))
            script, counted = (
                self.manifest.script("enqueue_bloom"),
                {"bloom_count": keys.bloom_count},
            )
        script_keys = {**counted, "ready": keys.ready, "waiting": keys.waiting,
                       "frontier": keys.frontier}  # fmt: skip
        return run_named(script, script_keys, args, pipe, items)

    def delay(self, entries: list[tuple[float, str, bytes]], pipe: Pipeline | None = None) -> None:
        """Park (due time in seconds since epoch, group, data) entries until they are due."""
        for shard, part in self.by_shard(entries, lambda entry: entry[1]).items():
            keys = self.shards[shard]
            mapping = {group.encode() + b"\n" + data: int(due * 1000) for due, group, data in part}
            (pipe or self.server).zadd(keys.delayed, mapping)
            # taken off by the lease that unparks them
            for crawl, count in crawls_of(group for _, group, _ in part).items():
                (pipe or self.server).hincrby(keys.crawl(crawl), "delayed", count)

    def _create_bloom_shards(self, keys: SpiderKeys) -> None:
        """Create each bitmap at its full size once: grown bit by bit, Redis would
        over-allocate a string by up to 1 MB (or double a small one)."""
        if self.bloom is None or keys.bloom_prefix in self._bloom_ready:
            return
        size = -(-self.bloom.shard_bits // 8)
        for shard in range(self.bloom.shards):
            key = f"{keys.bloom_prefix}{shard}"
            if not self.server.exists(key):
                self.server.set(key, bytes(size), nx=True)
        self._bloom_ready.add(keys.bloom_prefix)

    def lease(
        self, count: int, lease_timeout: float, shares: Mapping[str, int] | None = None
    ) -> tuple[list[Lease], float | None]:
        """Lease up to ``count`` requests to this node, best priority first
        among its hosts and nobody's (host affinity), after moving retries that
        are due into the queue. Returns (the leases, when the next waiting host
        or delayed request is due in seconds since epoch, if nothing was leased).
        A sharded frontier asks the shards that last had work for the bulk and a
        few others in turn (``leaseplan``), in one round trip. ``shares``: the
        parts' counts the script takes besides, split over the shards asked in
        proportion (a render node's ``render_count``: render requests besides)."""
        pipe = self.server.pipeline(transaction=False)
        self.lease_on(pipe, count, lease_timeout, shares)
        return self.lease_result(execute(pipe))

    def lease_on(
        self,
        pipe: Pipeline,
        count: int,
        lease_timeout: float,
        shares: Mapping[str, int] | None = None,
    ) -> int:
        """``lease``, queued on ``pipe``: one call per shard asked, whose number
        is returned (``lease_result`` reads their results from ``execute(pipe)``)."""
        plan = self._planner.plan(count)
        self._asked = [shard for shard, _ in plan]
        for shard, wanted in plan:
            keys = self.shards[shard]
            now = now_ms()
            run_named(
                self.manifest.script("lease"),
                {"leases": keys.leases(self.node_id), "nodes": keys.nodes,
                 "delayed": keys.delayed, "ready": keys.ready, "waiting": keys.waiting,
                 "frontier": keys.frontier, "rates": keys.rates, "crawl_delay": keys.crawl_delay,
                 "lines": keys.lines},
                {"count": wanted, "deadline": now + int(lease_timeout * 1000),
                 "node": self.node_id, "now": now, "queue_prefix": keys.queue(""),
                 "host_prefix": keys.host(""), "delay_max": self.crawl_delay_max,
                 "burst_seconds": RATE_BURST_SECONDS, "data_prefix": keys.data(""),
                 "tolerance": self.send_tolerance, "lead": LEASE_LEAD_MS,
                 "domain_prefix": keys.domain(""), "ip_prefix": keys.address(""),
                 "levels_apart": int(self.keys.shards > 1),
                 "affinity": self.host_affinity_ms, "alive_after": now - self.node_timeout_ms,
                 **{name: n if wanted == count else math.ceil(n * wanted / max(count, 1))
                    for name, n in (shares or {}).items()}},
                pipe,
            )  # fmt: skip
        return len(plan)

    @property
    def scopes(self) -> list[SpiderKeys]:
        """Where the frontier's state lives: under NAME, and in each shard."""
        return [self.keys] if self.keys.shards == 1 else [self.keys, *self.shards]

    def _next_round(self, purpose: str) -> list[int]:
        """Indexes into ``scopes`` for a heartbeat's ``purpose``: NAME, and the
        next HEARTBEAT_SHARDS shards in turn, so a heartbeat's cost does not
        grow with the shard count (each shard is seen every few heartbeats)."""
        if len(self.shards) <= HEARTBEAT_SHARDS:
            return list(range(len(self.scopes)))
        start = self._round_start.get(purpose, 0)
        self._round_start[purpose] = (start + HEARTBEAT_SHARDS) % len(self.shards)
        return [0] + [1 + (start + n) % len(self.shards) for n in range(HEARTBEAT_SHARDS)]

    def in_scopes(
        self,
        script: Script,
        keys_and_args: Callable[[SpiderKeys], tuple[dict[str, str], dict[str, Any]]],
        turn: str | None = None,
    ) -> list[tuple[int, Any]]:
        """Run ``script`` under NAME and in each shard (with ``turn``, in that
        heartbeat duty's turn of shards), in one round trip: (scope index, result)."""
        scopes = self.scopes
        chosen = self._next_round(turn) if turn else list(range(len(scopes)))
        pipe = self.server.pipeline(transaction=False)
        for index in chosen:
            run_named(script, *keys_and_args(scopes[index]), pipe)
        return list(zip(chosen, execute(pipe), strict=True))

    def lease_result(self, results: list[Any]) -> tuple[list[Lease], float | None]:
        """The leases of one lease call's results (one per shard asked)."""
        leased: list[Lease] = []
        due: list[float] = []
        outcome = []
        for shard, result in zip(self._asked, results, strict=True):
            named = fields(result)
            members, next_due = named["leases"], named["next_due"]
            self.tally.add(named)
            leased.extend(leases_of(named, self.host_notes))
            outcome.append((shard, len(members), bool(next_due)))
            if next_due:
                due.append(float(next_due) / 1000)
        self._planner.record(outcome)
        return leased, (min(due) if due and not leased else None)

    @property
    def looked_everywhere(self) -> bool:
        """Whether the last lease came back empty and every shard has been
        looked into since work was last found: until then an idle node looks
        again at once, in other shards."""
        return self._planner.looked_everywhere

    def release(self, items: list[bytes], pipe: Pipeline | None = None) -> None:
        """Drop finished requests (lease members) from this node's leases, and
        their JSON with them."""
        parts = self.by_shard(items, lambda member: connection.text(member.partition(b"\n")[0]))
        for shard, part in parts.items():
            keys = self.shards[shard]
            run_named(
                self.manifest.script("release"),
                {"leases": keys.leases(self.node_id)},
                {"data_prefix": keys.data("")},
                pipe,
                part,
            )

    def reclaim(
        self,
        node_timeout: float,
        *,
        closing_node: str = "",
        forget_after: float = defaults.NODE_FORGET_AFTER,
        in_turn: bool = False,
        observed_until: float | None = None,
    ) -> Reclaimed:
        """Return leases of dead nodes (start leases too), expired leases, and
        those of ``closing_node``; forget nodes silent for ``forget_after`` seconds.
        A sharded frontier does it in each shard (its leases) and under NAME (the
        start leases and the node registry); ``in_turn``, under NAME and in the
        heartbeat's turn of shards. No node is dead for a silence after
        ``observed_until``, as far as this node heard Redis (s since epoch)."""
        requests: Counter[str] = Counter()
        start_urls: Counter[str] = Counter()
        # each call returns at most reclaim_batch leases; a node that died holding
        # more is emptied over several calls, each short for Redis (in turn: over
        # the next beats, as the turn comes back to each shard)
        heard_until = now_ms() if observed_until is None else int(observed_until * 1000)
        dead_before = min(heard_until, now_ms()) - int(node_timeout * 1000)
        for _ in range(1 if in_turn else RECLAIM_CALLS):
            more = False
            for result in self._reclaim_once(dead_before, closing_node, forget_after, in_turn):
                more = more or bool(int(result["more"]))
                requests.update(counts_of(result["requests"]))
                start_urls.update(counts_of(result["start_entries"]))
            if not more:
                break
        return Reclaimed(dict(requests), dict(start_urls))

    def _reclaim_once(
        self, dead_before: int, closing_node: str, forget_after: float, in_turn: bool
    ) -> list[Any]:
        now = now_ms()

        def named(keys: SpiderKeys) -> tuple[dict[str, str], dict[str, Any]]:
            script_keys = {"nodes": keys.nodes, "ready": keys.ready,
                           "start_urls": keys.start_urls, "waiting": keys.waiting,
                           "frontier": keys.frontier}  # fmt: skip
            args = {"now": now, "dead_before": dead_before,
                    "leases_prefix": keys.leases_prefix(), "closing": closing_node,
                    "forget_before": now - int(forget_after * 1000),
                    "node_prefix": keys.node(""), "start_leases_prefix": keys.start_leases(""),
                    "start_type": keys.start_type, "queue_prefix": keys.queue(""),
                    "data_prefix": keys.data(""), "batch": self.reclaim_batch}  # fmt: skip
            return script_keys, args

        results = self.in_scopes(
            self.manifest.script("reclaim"),
            named,
            "reclaim" if in_turn else None,
        )
        return [fields(result) for _, result in results]

    def registries(self) -> list[str]:
        """The node registries a heartbeat goes to: NAME:nodes, and each shard's
        (a shard's leases are taken back by what its own registry says)."""
        if self.keys.shards == 1:
            return [self.keys.nodes]
        return [self.keys.nodes, *(keys.nodes for keys in self.shards)]

    def heartbeat(self, pipe: Pipeline | None = None) -> None:
        beat = {self.node_id: now_ms()}
        for registry in self.registries():
            (pipe or self.server).zadd(registry, beat)

    def sizes(self, in_turn: bool = False) -> FrontierSizes:
        """The whole frontier's sizes: a sharded one's summed over its shards.
        ``in_turn`` reads NAME and the heartbeat's turn of shards, and takes
        the others as they were last read."""

        def named(keys: SpiderKeys) -> tuple[dict[str, str], dict[str, Any]]:
            script_keys = {"start_urls": keys.start_urls, "frontier": keys.frontier,
                           "nodes": keys.nodes, "dupefilter": keys.dupefilter, "dlq": keys.dlq,
                           "delayed": keys.delayed, "bloom_count": keys.bloom_count,
                           "ready": keys.ready, "waiting": keys.waiting, "held": keys.held,
                           "banned": keys.banned, "crawls": keys.crawls}  # fmt: skip
            args = {"leases_prefix": keys.leases_prefix(),
                    "start_leases_prefix": keys.start_leases(""), "start_type": keys.start_type,
                    "now": now_ms(), "crawl_prefix": keys.crawl("")}  # fmt: skip
            return script_keys, args

        results = self.in_scopes(
            self.manifest.script("frontier"),
            named,
            "sizes" if in_turn else None,
        )
        for index, counts in results:
            self._scope_sizes[index] = {name: int(n) for name, n in fields(counts).items()}
        read = self._scope_sizes.values() if in_turn else [self._scope_sizes[i] for i, _ in results]
        return FrontierSizes(**{name: sum(sizes[name] for sizes in read) for name in SIZE_FIELDS})
