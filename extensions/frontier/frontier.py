"""The shared Redis frontier: queue, dupefilter, leases and node registry.

A request taken from the queue is leased to its node, not deleted: it stays in
``NAME:leases:NODE`` until the node releases it after the response was handled.
If the node dies, its heartbeat goes stale and any other node returns its
leases to the queue. Every multi-key change is one Lua script (``scripts/``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import redis
from redis.cluster import TransactionStrategy

from extensions import connection, defaults
from extensions.cluster.checkpoint import now_ms
from extensions.frontier.leaseplan import LeasePlanner
from extensions.keys import SpiderKeys
from extensions.recrawl.records import RecrawlSchedule, revisit_page, revisit_state

if TYPE_CHECKING:
    from redis.client import Pipeline
    from redis.commands.core import Script

    from extensions.frontier.bloom import BloomParams

logger = logging.getLogger(__name__)
T = TypeVar("T")


#: (fingerprint or "" for dont_filter, group, priority, request JSON or b"")
Entry = tuple[str | bytes, str, float, bytes]
#: seconds of a rate-limited group's requests one lease may hand out at once
RATE_BURST_SECONDS = 0.05
#: ms before its next slot a paced group may be leased, so that its request is
#: at the node when the slot comes (a lease's round trip and the engine's turn)
LEASE_LEAD_MS = 100
HOUR_MS = 3_600_000


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


@dataclass(frozen=True)
class Added:
    """What an enqueue did: fingerprints that were new, and of those, the group
    of each request dropped because its group had used its HOST_PAGE_BUDGET."""

    new: int
    over_budget: tuple[str, ...] = ()

    @classmethod
    def of(cls, result: Any) -> Added:
        new, over = result
        return cls(int(new), tuple(connection.text(group) for group in over))

    @classmethod
    def combine(cls, results: list[Any]) -> Added:
        """What the enqueue calls of one batch (one per shard) did together."""
        parts = [cls.of(result) for result in results]
        return cls(sum(p.new for p in parts), tuple(g for p in parts for g in p.over_budget))


# Bytes of Scrapy's request fingerprint the exact dupefilter keeps: 2 name the
# bucket, 12 are stored; 112 bits leave no collision to fear.
FINGERPRINT_BYTES = 14


def load_script(name: str) -> str:
    scripts = resources.files("extensions.frontier.scripts")
    # Lua scripts cannot import one another: the shared helpers are prepended.
    prelude = scripts.joinpath("_shared.lua").read_text()
    return prelude + scripts.joinpath(f"{name}.lua").read_text()


class SentFingerprints:
    """Fingerprints this node already wrote to the shared dupefilter.

    Most links a crawl extracts were seen before, many by this very node; those
    are dropped here, before being serialized and sent to Redis to be dropped
    there. Two generations of at most ``size`` bound the memory; a fingerprint
    forgotten only costs the trip to Redis it would have cost anyway.
    """

    def __init__(self, size: int):
        self.size = size
        self._current: set[bytes | str] = set()
        self._previous: set[bytes | str] = set()

    def add(self, fingerprint: bytes | str) -> bool:
        """Remember ``fingerprint``; False if it was sent before."""
        if fingerprint in self._current or fingerprint in self._previous:
            return False
        if self.size <= 0:
            return True
        if len(self._current) >= self.size:
            self._previous, self._current = self._current, set()
        self._current.add(fingerprint)
        return True

    def clear(self) -> None:
        self._current, self._previous = set(), set()


def run_script(script: Script, keys: list, args: list, pipe: Pipeline | None = None):
    """Call ``script``, or queue it on ``pipe`` (its result then comes from
    ``execute(pipe)``).

    In a transaction the script goes as EVAL, carrying itself: a script Redis
    does not know (after a restart or a failover) would fail inside the
    transaction, which cannot be run again in part; and redis-py would send
    SCRIPT EXISTS before every execute. Outside one it goes as EVALSHA, 40
    bytes instead of a few KB that Redis would hash on every call (a sharded
    flush sends one per shard it touches); ``execute`` runs any that Redis no
    longer knows again in full.
    """
    if pipe is None:
        return script(keys=keys, args=args)
    if _in_transaction(pipe):
        return pipe.execute_command("EVAL", script.script, len(keys), *keys, *args)
    queued: dict[int, tuple[Script, list, list]] = pipe.__dict__.setdefault(_BY_HASH, {})
    queued[len(pipe)] = (script, keys, args)
    return pipe.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)


RECLAIM_BATCH = 2000  # leases one reclaim call returns at most
RECLAIM_CALLS = 1000  # calls one reclaim makes at most (2M leases); the next beat goes on
HEARTBEAT_SHARDS = 16  # shards a heartbeat reads sizes from and reclaims in
_BY_HASH = "_scripts_by_hash"  # on a pipeline: its EVALSHA commands, by position


def _in_transaction(pipe: Pipeline) -> bool:
    strategy = getattr(pipe, "_execution_strategy", None)
    if strategy is not None:  # a cluster pipeline (its ``transaction`` is a method)
        return isinstance(strategy, TransactionStrategy)
    return bool(pipe.transaction)


def execute(pipe: Pipeline, *, raise_on_error: bool = True) -> list[Any]:
    """``pipe.execute()``; each script Redis did not know is loaded and run
    again on its own (it did not run: NOSCRIPT), in its place in the results."""
    results = pipe.execute(raise_on_error=False)
    for index, (script, keys, args) in pipe.__dict__.pop(_BY_HASH, {}).items():
        if isinstance(results[index], redis.exceptions.NoScriptError):
            try:
                results[index] = script(keys=keys, args=args)  # loads it, then runs it
            except redis.RedisError as exc:
                results[index] = exc
    if raise_on_error:
        failed = next((r for r in results if isinstance(r, Exception)), None)
        if failed is not None:
            raise failed
    return results


def push_start_entries(
    client: redis.Redis | Pipeline,
    keys: SpiderKeys,
    entries: Sequence[bytes | str],
    *,
    back: bool = False,
    score: float = 0,
) -> None:
    """Add entries to the start key, read in the order given; ``back`` puts
    entries that were taken before where they are read first (a sorted set
    gives them ``score`` unless ``back``, which gives its highest score)."""
    if not entries:
        return
    if keys.start_type == "set":
        client.sadd(keys.start_urls, *entries)
    elif keys.start_type == "zset":
        if back:
            top: Any = client.zrevrange(keys.start_urls, 0, 0, withscores=True)
            score = top[0][1] if top else 0
        client.zadd(keys.start_urls, dict.fromkeys(entries, score))  # type: ignore[type-var]
    elif back:
        client.rpush(keys.start_urls, *reversed(entries))
    else:
        client.lpush(keys.start_urls, *entries)


def _counts(flat: list) -> dict[str, int]:
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


def _left(limit: int | None, done: int) -> int | None:
    return None if limit is None else max(limit - done, 0)


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

    @property
    def pending(self) -> int:
        """Work the cluster still has to do (start URLs, queue, in flight, retries)."""
        return self.start_urls + self.queued + self.in_flight + self.delayed


class Frontier:
    """Redis operations on one spider's frontier, for one node."""

    def __init__(
        self,
        server: redis.Redis,
        keys: SpiderKeys,
        node_id: str,
        bloom: BloomParams | None = None,
        *,
        budget: int = 0,
        crawl_delay_max: float = defaults.CLUSTER_CRAWL_DELAY_MAX,
        send_tolerance: float = defaults.CLUSTER_SEND_TOLERANCE,
    ):
        self.server = server
        self.budget = budget
        self.crawl_delay_max = crawl_delay_max
        self.send_tolerance = send_tolerance
        #: malformed host fields the leases ignored (another writer's), since the last look
        self.bad_host_fields = 0
        self.keys = keys
        self.node_id = node_id
        self.bloom = bloom
        self.leases_key = keys.leases(node_id)
        self._enqueue = server.register_script(load_script("enqueue"))
        self._enqueue_bloom = server.register_script(load_script("enqueue_bloom"))
        self._lease = server.register_script(load_script("lease"))
        self._reclaim = server.register_script(load_script("reclaim"))
        self.reclaim_batch = RECLAIM_BATCH
        self._release = server.register_script(load_script("release"))
        self._sizes = server.register_script(load_script("frontier"))
        self._feed = server.register_script(load_script("recrawl_feed"))
        self._requeue = server.register_script(load_script("recrawl_requeue"))
        self._bloom_ready: set[str] = set()  # the bitmaps known to exist, by prefix
        self.shards = keys.all_shards()  # each shard's keys, built once
        self._planner = LeasePlanner(len(self.shards))
        self._asked: list[int] = []  # the shards the last lease asked, in order
        self._round_start: dict[str, int] = {}  # the next heartbeat's first shard
        self._scope_sizes: dict[int, list[int]] = {}  # sizes() per scope, last read

    def _by_shard(self, items: Sequence[T], group_of: Callable[[T], str]) -> dict[int, list[T]]:
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
        parts = self._by_shard(entries, lambda entry: entry[1])
        self._planner.mark_hot(parts)
        return Added.combine(
            [self._enqueue_shard(self.shards[shard], part) for shard, part in parts.items()]
        )

    def enqueue_on(self, pipe: Pipeline, entries: list[Entry]) -> int:
        """``enqueue``, queued on ``pipe``: one call per shard, whose number is
        returned (``Added.combine`` reads their results from ``execute(pipe)``)."""
        parts = self._by_shard(entries, lambda entry: entry[1])
        self._planner.mark_hot(parts)
        for shard, part in parts.items():
            self._enqueue_shard(self.shards[shard], part, pipe)
        return len(parts)

    def _enqueue_shard(self, keys: SpiderKeys, entries: list[Entry], pipe: Pipeline | None = None):
        args: list[str | float | bytes | int] = [keys.queue(""), keys.host(""), self.budget]
        if self.bloom is None:
            args.extend((keys.dupefilter + ":", keys.data("")))  # its levels' buckets
            for fingerprint, group, priority, data in entries:
                args.extend((fingerprint[:FINGERPRINT_BYTES], group, priority, data))
            script, first_key = self._enqueue, keys.dupefilter
        else:
            self._create_bloom_shards(keys)
            args.extend((keys.bloom_prefix, self.bloom.hashes, keys.data("")))
            for fingerprint, group, priority, data in entries:
                if fingerprint:
                    raw = fingerprint if isinstance(fingerprint, bytes) else fingerprint.encode()
                    shard, offsets = self.bloom.positions(raw)
                    args.append(shard)
                    args.extend(offsets)
                else:  # dont_filter: no check, same stride
                    args.extend([""] * (self.bloom.hashes + 1))
                args.extend((group, priority, data))
            script, first_key = self._enqueue_bloom, keys.bloom_count
        script_keys = [first_key, keys.ready, keys.waiting, keys.frontier]
        return run_script(script, script_keys, args, pipe)

    def delay(self, entries: list[tuple[float, str, bytes]], pipe: Pipeline | None = None) -> None:
        """Park (due time in seconds since epoch, group, data) entries until they are due."""
        for shard, part in self._by_shard(entries, lambda entry: entry[1]).items():
            mapping = {group.encode() + b"\n" + data: int(due * 1000) for due, group, data in part}
            (pipe or self.server).zadd(self.shards[shard].delayed, mapping)

    def revisit(
        self, entries: list[tuple[str, str, float, bytes]], pipe: Pipeline | None = None
    ) -> None:
        """Schedule pages to be fetched again: (request fingerprint in hex, group,
        due time in seconds since epoch, the request's JSON) entries."""
        for shard, part in self._by_shard(entries, lambda entry: entry[1]).items():
            keys = self.shards[shard]
            target = pipe or self.server
            target.hset(
                keys.revisit,
                mapping={fp: group.encode() + b"\n" + data for fp, group, _, data in part},
            )
            target.zadd(keys.due, {fp: int(due * 1000) for fp, _, due, _ in part})

    def feed_due(self, limit: int, in_turn: bool = True) -> int:
        """Queue up to ``limit`` pages per shard whose recrawl is due, in a
        heartbeat's turn of shards (or in every shard); returns how many were queued."""
        now = now_ms()
        results = self._in_scopes(
            self._feed,
            lambda keys: (
                [keys.due, keys.revisit, keys.ready, keys.waiting, keys.frontier],
                [now, limit, keys.queue(""), keys.data("")],
            ),
            "feed" if in_turn else None,
        )
        return sum(int(queued) for _, queued in results)

    def requeue(self, entries: list[tuple[str, str, bytes]]) -> int:
        """Queue (fingerprint in hex, group, request JSON) pages a status store
        outside Redis found due, each marked in NAME:revisit; a page marked
        already is queued or in flight, and is not queued again. Returns how
        many were queued."""
        queued = 0
        for shard, part in self._by_shard(entries, lambda entry: entry[1]).items():
            keys = self.shards[shard]
            args: list[Any] = [keys.queue(""), keys.data("")]
            for fingerprint, group, data in part:
                args.extend((fingerprint, group, data))
            script_keys = [keys.revisit, keys.ready, keys.waiting, keys.frontier]
            queued += int(run_script(self._requeue, script_keys, args))
        return queued

    def unmark(self, entries: list[tuple[str, str]], pipe: Pipeline | None = None) -> None:
        """Forget the queued marks of (fingerprint in hex, group) pages whose new
        status is in the store outside Redis."""
        for shard, part in self._by_shard(entries, lambda entry: entry[1]).items():
            (pipe or self.server).hdel(self.shards[shard].revisit, *(fp for fp, _ in part))

    def recrawl_schedule(self, hours: int = 24) -> RecrawlSchedule:
        """The pages kept for a recrawl, how many are due now, and how many fall
        due in each of the next ``hours`` hours."""
        now = now_ms()
        pipe = self.server.pipeline(transaction=False)
        for keys in self.shards:
            pipe.hlen(keys.revisit)
            pipe.zcount(keys.due, "-inf", now)
            for hour in range(hours):
                start, end = now + hour * HOUR_MS, now + (hour + 1) * HOUR_MS
                pipe.zcount(keys.due, f"({start}", end)
        counts = [int(n) for n in execute(pipe)]
        stride = hours + 2
        shards = [counts[i : i + stride] for i in range(0, len(counts), stride)]
        return RecrawlSchedule(
            pages=sum(shard[0] for shard in shards),
            due=sum(shard[1] for shard in shards),
            due_by_hour=[sum(shard[2 + hour] for shard in shards) for hour in range(hours)],
        )

    def recrawl_now(
        self, wanted: Callable[[str, float | None], bool], limit: int | None = None
    ) -> tuple[int, int]:
        """Make the recorded pages ``wanted(url, last fetch time)`` accepts due
        now, at most ``limit`` of them: (pages made due, unreadable records).
        Reads every record (HSCAN): a by-hand operation, not a node's.

        A page already queued or in flight is left alone (ZADD XX); one due
        earlier keeps its date (LT): so none is queued twice."""
        now = now_ms()
        chosen = unreadable = 0
        for keys in self.shards:
            batch: list[bytes] = []
            for fingerprint, record in self.server.hscan_iter(keys.revisit, count=1000):
                page = revisit_page(record)
                if page is None:
                    unreadable += 1
                elif wanted(*page):
                    batch.append(fingerprint)
                    if len(batch) >= 1000:
                        chosen += self._due_now(keys, batch, now, _left(limit, chosen))
                        batch = []
                        if _left(limit, chosen) == 0:
                            break
            chosen += self._due_now(keys, batch, now, _left(limit, chosen))
            if _left(limit, chosen) == 0:
                break
        return chosen, unreadable

    def lastmod(self, entries: list[tuple[str, str, float]]) -> tuple[int, int]:
        """What a sitemap's ``<lastmod>`` says of pages kept for a recrawl:
        (request fingerprint in hex, group, lastmod in seconds since epoch)
        entries. A page changed since its last fetch is made due now; one that
        did not has its recrawl put off by its interval from now. Only pages
        waiting for their date are moved (ZADD XX), so none is queued twice.
        Returns (made due, put off)."""
        now = now_ms()
        sooner = later = 0
        for shard, part in self._by_shard(entries, lambda entry: entry[1]).items():
            keys = self.shards[shard]
            records: list[Any] = self.server.hmget(keys.revisit, [fp for fp, _, _ in part])
            due_now: dict[str, int] = {}
            put_off: dict[str, int] = {}
            for (fp, _, modified), record in zip(part, records, strict=True):
                page = revisit_state(record) if record else None
                _, fetched_at, interval = page or ("", None, None)
                if fetched_at is None:
                    continue  # never fetched: the dupefilter decides, as for any link
                if modified > fetched_at:
                    due_now[fp] = now
                elif interval:
                    put_off[fp] = now + int(interval * 1000)
            pipe = self.server.pipeline(transaction=False)
            if due_now:
                pipe.zadd(keys.due, due_now, xx=True, lt=True, ch=True)
            if put_off:
                pipe.zadd(keys.due, put_off, xx=True, gt=True, ch=True)
            results = iter(execute(pipe))
            sooner += int(next(results)) if due_now else 0
            later += int(next(results)) if put_off else 0
        return sooner, later

    def _due_now(
        self, keys: SpiderKeys, fingerprints: list[bytes], now: int, limit: int | None
    ) -> int:
        if not fingerprints or limit == 0:
            return 0
        # only pages waiting for their date (XX): the others are queued or in flight
        pipe = self.server.pipeline(transaction=False)
        for fingerprint in fingerprints:
            pipe.zscore(keys.due, fingerprint)
        scores = execute(pipe)
        waiting = [fp for fp, s in zip(fingerprints, scores, strict=True) if s is not None][:limit]
        if waiting:
            self.server.zadd(keys.due, dict.fromkeys(waiting, now), xx=True, lt=True)
        return len(waiting)

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

    def lease(self, count: int, lease_timeout: float) -> tuple[list[Lease], float | None]:
        """Lease up to ``count`` requests to this node, best priority first,
        after moving retries that are due into the queue.

        Returns (the leases, when the next waiting host or delayed request is
        due in seconds since epoch, if nothing was leased). A sharded frontier
        asks the shards that last had work for the bulk and a few others in turn
        (``leaseplan``), in one round trip.
        """
        pipe = self.server.pipeline(transaction=False)
        self.lease_on(pipe, count, lease_timeout)
        return self.lease_result(execute(pipe))

    def lease_on(self, pipe: Pipeline, count: int, lease_timeout: float) -> int:
        """``lease``, queued on ``pipe``: one call per shard asked, whose number
        is returned (``lease_result`` reads their results from ``execute(pipe)``)."""
        plan = self._planner.plan(count)
        self._asked = [shard for shard, _ in plan]
        for shard, wanted in plan:
            keys = self.shards[shard]
            now = now_ms()
            run_script(
                self._lease,
                [keys.leases(self.node_id), keys.nodes, keys.delayed, keys.ready, keys.waiting,
                 keys.frontier, keys.rates, keys.crawl_delay],
                [wanted, now + int(lease_timeout * 1000), self.node_id, now, keys.queue(""),
                 keys.host(""), self.crawl_delay_max, RATE_BURST_SECONDS, keys.data(""),
                 self.send_tolerance, LEASE_LEAD_MS],
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

    def _in_scopes(
        self,
        script: Script,
        keys_and_args: Callable[[SpiderKeys], tuple[list, list]],
        turn: str | None = None,
    ) -> list[tuple[int, Any]]:
        """Run ``script`` under NAME and in each shard (with ``turn``, in that
        heartbeat duty's turn of shards), in one round trip: (scope index, result)."""
        scopes = self.scopes
        chosen = self._next_round(turn) if turn else list(range(len(scopes)))
        pipe = self.server.pipeline(transaction=False)
        for index in chosen:
            run_script(script, *keys_and_args(scopes[index]), pipe)
        return list(zip(chosen, execute(pipe), strict=True))

    def lease_result(self, results: list[Any]) -> tuple[list[Lease], float | None]:
        """The leases of one lease call's results (one per shard asked)."""
        leased: list[Lease] = []
        due: list[float] = []
        outcome = []
        for shard, result in zip(self._asked, results, strict=True):
            members, data, next_due, slots, watched, bad = result
            self.bad_host_fields += int(bad)
            watched_groups = set(watched)
            for member, item, paced in zip(members, data, slots, strict=True):
                slot, _, window = paced.partition(b":")
                group = member.partition(b"\n")[0]
                leased.append(
                    Lease(
                        member,
                        item,
                        int(slot) / 1000,
                        int(window or 0) / 1000,
                        group in watched_groups,
                    )
                )
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
        parts = self._by_shard(items, lambda member: connection.text(member.partition(b"\n")[0]))
        for shard, part in parts.items():
            keys = self.shards[shard]
            run_script(self._release, [keys.leases(self.node_id)], [keys.data(""), *part], pipe)

    def reclaim(
        self,
        node_timeout: float,
        *,
        closing_node: str = "",
        forget_after: float = defaults.NODE_FORGET_AFTER,
        in_turn: bool = False,
    ) -> Reclaimed:
        """Return leases of dead nodes (start leases too), expired leases, and
        those of ``closing_node``; forget nodes silent for ``forget_after`` seconds.
        A sharded frontier does it in each shard (its leases) and under NAME (the
        start leases and the node registry); ``in_turn``, under NAME and in the
        heartbeat's turn of shards."""
        requests: dict[str, int] = {}
        start_urls: dict[str, int] = {}
        # each call returns at most reclaim_batch leases; a node that died holding
        # more is emptied over several calls, each short for Redis (in turn: over
        # the next beats, as the turn comes back to each shard)
        for _ in range(1 if in_turn else RECLAIM_CALLS):
            more = False
            for returned, started, left in self._reclaim_once(
                node_timeout, closing_node, forget_after, in_turn
            ):
                more = more or bool(int(left))
                for totals, counts in (
                    (requests, _counts(returned)),
                    (start_urls, _counts(started)),
                ):
                    for node, count in counts.items():
                        totals[node] = totals.get(node, 0) + count
            if not more:
                break
        return Reclaimed(requests, start_urls)

    def _reclaim_once(
        self, node_timeout: float, closing_node: str, forget_after: float, in_turn: bool
    ) -> list[Any]:
        now = now_ms()
        results = self._in_scopes(
            self._reclaim,
            lambda keys: (
                [keys.nodes, keys.ready, keys.start_urls, keys.waiting, keys.frontier],
                [
                    now,
                    now - int(node_timeout * 1000),
                    keys.leases_prefix(),
                    closing_node,
                    now - int(forget_after * 1000),
                    keys.node(""),
                    keys.start_leases(""),
                    keys.start_type,
                    keys.queue(""),
                    keys.data(""),
                    self.reclaim_batch,
                ],
            ),
            "reclaim" if in_turn else None,
        )
        return [result for _, result in results]

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
        results = self._in_scopes(
            self._sizes,
            lambda keys: (
                [
                    keys.start_urls,
                    keys.frontier,
                    keys.nodes,
                    keys.dupefilter,
                    keys.dlq,
                    keys.delayed,
                    keys.bloom_count,
                    keys.ready,
                    keys.waiting,
                    keys.held,
                    keys.banned,
                ],
                [keys.leases_prefix(), keys.start_leases(""), keys.start_type, now_ms()],
            ),
            "sizes" if in_turn else None,
        )
        for index, counts in results:
            self._scope_sizes[index] = [int(v) for v in counts]
        read = self._scope_sizes.values() if in_turn else [self._scope_sizes[i] for i, _ in results]
        return FrontierSizes(*(sum(column) for column in zip(*read, strict=True)))

    def clear(self) -> None:
        """Forget the crawl: queue, seen fingerprints, every node's leases and
        progress. Start URLs waiting to be read (those a node had taken go back
        to the start list) and the dead letters stay."""
        nodes = sorted(
            {
                connection.text(n)
                for key in self.registries()
                for n in self.server.zrange(key, 0, -1)
            }
        )
        for node in nodes:
            entries = self.server.lrange(self.keys.start_leases(node), 0, -1)
            if entries:
                push_start_entries(self.server, self.keys, entries, back=True)
                self.server.delete(self.keys.start_leases(node))
        for keys in self.scopes:
            doomed = [
                keys.requests, keys.dupefilter, keys.delayed, keys.nodes, keys.checkpoint,
                keys.fingerprinter, keys.ready, keys.waiting, keys.frontier, keys.crawl_delay,
                keys.held, keys.banned,
                keys.bloom_count, keys.shards_key, keys.revisit, keys.due,
            ]  # fmt: skip
            doomed += [keys.leases(n) for n in nodes] + [keys.node(n) for n in nodes]
            self.server.delete(*doomed)
            patterns = (keys.bloom_prefix, keys.queue(""), keys.data(""), keys.host(""),
                        keys.dupefilter + ":")  # fmt: skip
            for pattern in patterns:
                batch = []
                for key in self.server.scan_iter(
                    match=connection.glob_escape(pattern) + "*", count=1000
                ):
                    batch.append(key)
                    if len(batch) >= 1000:
                        self.server.delete(*batch)
                        batch = []
                if batch:
                    self.server.delete(*batch)

    def convert_legacy_queue(self, group_of: Callable[[dict[str, Any]], str]) -> int:
        """Move the single queue of earlier versions (``NAME:requests``, JSON)
        into the group queues, in batches; returns how many moved."""
        moved = 0
        while True:
            items: Any = self.server.zrange(self.keys.requests, 0, 499, withscores=True)
            if not items:
                return moved
            entries: list[Entry] = []
            for data, score in items:
                try:
                    obj = json.loads(data)
                    group = group_of(obj) if isinstance(obj, dict) else ""
                except (ValueError, RecursionError):
                    group = ""  # read, and dead-lettered, by the node that leases it
                entries.append(("", group, -score, data))
            pipe = self.server.pipeline(transaction=True)
            self.enqueue_on(pipe, entries)
            pipe.zrem(self.keys.requests, *(data for data, _ in items))
            pipe.execute()
            moved += len(items)
