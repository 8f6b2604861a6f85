"""Moving requests between the Redis queues and MongoDB (``FRONTIER_OVERFLOW``).

The scripts that queue send a group's requests beyond ``FRONTIER_HOST_QUEUE_MAX``
to ``NAME:spill`` (``scripts/_queues.lua``); every node, each ``FRONTIER_OVERFLOW_INTERVAL``,
in a worker thread:

1. **spills**: takes a batch into its journal ``NAME:spilling:NODE``, writes it to
   MongoDB (``$setOnInsert``: writing it twice changes nothing) and only then
   drops the journal (``spill_done.lua``). A node dying in between leaves the
   journal, which any node writes again once the node's heartbeat is stale;
2. **refills**: claims the groups due (``NAME:refill``, a claim expires), reads
   each one's best waiting requests and queues them (``refill.lua``, which marks
   each in ``NAME:refilled`` and queues none marked or present already), marks
   their documents taken, then drops the marks. Marks a dead node left are
   finished the same way by any node.

So a request is in exactly one place at every step: the group's queue, the spill
list or a journal, MongoDB, or leased; a step cut short is finished by another.
While MongoDB cannot take spills, they wait in Redis; past
``FRONTIER_OVERFLOW_BACKLOG`` records nodes lease no more (``holding``), so the
crawl slows instead of dropping anything or filling Redis.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import defaultdict
from typing import TYPE_CHECKING, Any, cast

from twisted.internet import task, threads
from twisted.python.failure import Failure

from extensions import clock, connection
from extensions.cluster.checkpoint import now_ms
from extensions.frontier.overflow.store import MongoOverflow, SpillRecord
from extensions.frontier.overflow.turn import REFILL, SPILLED, TAKE, OverflowLimits, Turn, take_keys
from extensions.frontier.redisops import execute, fields, run_named

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy.statscollectors import StatsCollector

    from extensions.frontier.frontier import Frontier
    from extensions.keys import SpiderKeys

logger = logging.getLogger(__name__)

GROUPS_PER_TURN = 200  # groups one turn refills at most, per shard
SHARDS_PER_TURN = 16  # shards one turn looks at, in turn, on a sharded frontier
CLAIM_SECONDS = 15.0  # a refill claim's life: a node dying with it holds the group no longer
REFILL_RETRY_MS = 500  # a group still short of work (its requests on their way) waits this
RECOVER_EVERY = 10.0  # seconds between looks for what dead nodes left half done
SWEEP_EVERY = 600.0  # seconds between sweeps of old tombstones


class Overflow:
    """One node's share of the overflow's work, for every shard of the frontier."""

    def __init__(
        self,
        frontier: Frontier,
        store: MongoOverflow,
        limits: OverflowLimits,
        *,
        stats: StatsCollector,
        dead_letter: Callable[..., None],
        resumed: Callable[[], object],
    ):
        self.server = frontier.server
        self.shards = frontier.shards
        self.node_id = frontier.node_id
        self.store = store
        self.queue_max = limits.queue_max
        self.batch = limits.batch
        self.interval = limits.interval
        self.backlog_max = limits.backlog_max
        self.node_timeout = limits.node_timeout
        self.heartbeat_interval = limits.heartbeat_interval
        self.stats = stats
        self.dead_letter = dead_letter
        self.resumed = resumed  # nodes may lease again
        #: the spill records waiting in Redis passed FRONTIER_OVERFLOW_BACKLOG
        self.holding = False
        self.backlog = 0  # those records, as the last turn found them
        self.scripts = frontier.manifest  # the crawl's pieces: a refill pushes
        self._busy = False
        self._next_shard = 0
        self._waiting: dict[int, int] = {}  # spill records waiting, per shard, last seen
        self._loop: task.LoopingCall | None = None
        self._last_recover = 0.0
        self._last_sweep = 0.0
        self._failing = False
        #: when the last whole turn ended (s since epoch): this node heard Redis then
        self._heard: float | None = None

    # --- lifecycle ---------------------------------------------------------------

    def open(self) -> None:
        """Record the bound where every script reads it (each shard's frontier
        hash), and start the turns (the first takes the crawl's epoch)."""
        pipe = self.server.pipeline(transaction=False)
        for keys in self.shards:
            pipe.hset(keys.frontier, "host_queue_max", self.queue_max)
        pipe.execute()
        logger.info(
            "host groups keep at most %d requests in Redis; the rest go to %s",
            self.queue_max, self.store.describe(),
        )  # fmt: skip
        self._loop = task.LoopingCall(self._start_turn)
        self._loop.start(self.interval, now=True)

    def follow_epoch(self) -> None:
        """Take the crawl's epoch (NAME:frontier), setting one if there is none (a
        crawl begun, or wiped and begun again): the node that sets it drops what
        an earlier crawl left in MongoDB. In a turn, off the reactor."""
        holder = self.shards[0].frontier
        epoch = self.server.hget(holder, "overflow_epoch")
        if epoch is None:
            fresh = uuid.uuid4().hex[:12]
            if self.server.hsetnx(holder, "overflow_epoch", fresh):
                self.store.epoch = fresh
                self._drop_earlier_crawls()
                return
            epoch = self.server.hget(holder, "overflow_epoch")
        self.store.epoch = connection.text(epoch)

    def _drop_earlier_crawls(self) -> None:
        try:
            dropped = self.store.drop_other_epochs()
        except Exception as exc:  # MongoDB away: the old documents are ignored anyway
            logger.warning("could not drop an earlier crawl's overflow: %s", exc)
        else:
            if dropped:
                logger.info("dropped %d requests an earlier crawl left in %s",
                            dropped, self.store.describe())  # fmt: skip

    def close(self) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self.store.close()

    def _start_turn(self) -> None:
        if self._busy:  # one turn at a time; a slow MongoDB makes them rarer
            return
        self._busy = True
        threads.deferToThread(self.turn).addBoth(self.turn_done)

    def turn_done(self, result: Turn | Failure) -> None:
        """In the reactor: a turn's counts, dead letters and hold."""
        self._busy = False
        if isinstance(result, Failure):
            if not self._failing:
                logger.warning("moving requests between Redis and MongoDB failed: %s "
                               "(trying again)", result.getErrorMessage())  # fmt: skip
            self._failing = True
            self.stats.inc_value("overflow/errors")
            self._hold(self.backlog)  # what waits in Redis grows while MongoDB is away
            return
        if self._failing:
            logger.info("moving requests between Redis and MongoDB works again")
            self._failing = False
        if result.spilled:
            self.stats.inc_value("overflow/spilled", result.spilled)
        if result.refilled:
            self.stats.inc_value("overflow/refilled", result.refilled)
        if result.recovered:  # half-done steps of dead nodes finished
            self.stats.inc_value("overflow/recovered", result.recovered)
        for record in result.malformed:
            self.stats.inc_value("overflow/malformed")
            self.dead_letter(**record)
        self.stats.max_value("overflow/backlog_max", result.backlog)
        self._hold(result.backlog)
        if result.refilled:
            self.resumed()

    def _hold(self, backlog: int) -> None:
        if backlog > self.backlog_max and not self.holding:
            logger.warning(
                "%d requests wait in Redis for MongoDB (FRONTIER_OVERFLOW_BACKLOG = %d): "
                "leasing nothing until they are written", backlog, self.backlog_max,
            )  # fmt: skip
            self.stats.inc_value("overflow/held_back")
            self.holding = True
        elif backlog <= self.backlog_max and self.holding:
            logger.info("MongoDB took the waiting requests: leasing again")
            self.holding = False
            self.resumed()

    # --- a turn (in a worker thread) -------------------------------------------

    def _turn_shards(self) -> list[int]:
        """The shards this turn looks at: all of them, or the next SHARDS_PER_TURN
        in turn, so a turn's cost does not grow with the shard count (a sharded
        crawl's many nodes visit every shard often between them)."""
        if len(self.shards) <= SHARDS_PER_TURN:
            return list(range(len(self.shards)))
        first = self._next_shard
        self._next_shard = (first + SHARDS_PER_TURN) % len(self.shards)
        return [(first + n) % len(self.shards) for n in range(SHARDS_PER_TURN)]

    def turn(self) -> Turn:
        done = Turn()
        now = time.monotonic()
        self.follow_epoch()
        chosen = self._turn_shards()
        shards = [self.shards[index] for index in chosen]
        if now - self._last_recover >= RECOVER_EVERY:
            self._last_recover = now
            # after a silence of this node's own (Redis stalled, its thread starved)
            # the others' beats were as silent: they have a beat's time to speak
            heard = None if self._heard is None else self._heard + self.heartbeat_interval
            for keys in shards:
                done.recovered += self.recover(keys, done, heard)
        pipe = self.server.pipeline(transaction=False)
        for keys in shards:
            run_named(
                self.scripts.script(TAKE),
                take_keys(keys, self.node_id),
                {"node": self.node_id, "now": now_ms(), "batch": self.batch,
                 "claim_ms": int(CLAIM_SECONDS * 1000), "groups": GROUPS_PER_TURN,
                 "queue_prefix": keys.queue("")},
                pipe,
            )  # fmt: skip
        taken = [fields(result) for result in execute(pipe)]
        for index, result in zip(chosen, taken, strict=True):
            self._waiting[index] = int(result["waiting"]) + len(result["batch"])
        self.backlog = sum(self._waiting.values())
        for keys, index, result in zip(shards, chosen, taken, strict=True):
            batch, claimed = result["batch"], result["claimed"]
            if batch:
                done.spilled += self._write(keys, self.node_id, batch, done)
                self._waiting[index] -= len(batch)
            for at in range(0, len(claimed), 4):
                group = connection.text(claimed[at])
                room, tmin = int(claimed[at + 1]), connection.text(claimed[at + 2])
                claim = connection.text(claimed[at + 3])
                try:
                    done.refilled += self._refill_group(keys, group, room, tmin, claim, done)
                except Exception:
                    # its claim would hold it for CLAIM_SECONDS: due again soon instead
                    self.server.zadd(keys.named("refill"), {group: now_ms() + REFILL_RETRY_MS})
                    raise
        if now - self._last_sweep >= SWEEP_EVERY:
            self._last_sweep = now
            self.store.sweep()
        done.backlog = sum(self._waiting.values())
        self._heard = clock.now()
        return done

    def _write(self, keys: SpiderKeys, node: str, batch: list[bytes], done: Turn) -> int:
        """Write a journal's batch to MongoDB, then drop the journal."""
        records = []
        for raw in batch:
            record = SpillRecord.parse(raw)
            if record is None:
                raw_text = raw.decode("utf-8", "replace")[:2000]
                done.malformed.append(
                    {"kind": "overflow", "url": "", "error": "not a spill record", "raw": raw_text}
                )
            else:
                records.append(record)
        self.store.write(records)
        run_named(
            self.scripts.script(SPILLED),
            {
                "journal": keys.named("spilling", node=node),
                "spillers": keys.named("spillers"),
                "frontier": keys.frontier,
            },
            {"node": node, "queue_prefix": keys.queue(""), "data_prefix": keys.data("")},
        )
        return len(records)

    def _refill_group(
        self, keys: SpiderKeys, group: str, room: int, tmin: str, claim: str, done: Turn
    ) -> int:
        limit = min(room, self.batch)
        below = int(tmin) if tmin.lstrip("-").isdigit() else None
        waiting = self.store.waiting(group, limit, below) if limit else None
        args = {"queue_prefix": keys.queue(""), "data_prefix": keys.data(""),
                "node": self.node_id, "group": group, "now": now_ms(),
                "retry_ms": REFILL_RETRY_MS, "claim": claim}  # fmt: skip
        items: list[Any] = []
        bad: list[tuple[str, str]] = []  # (id, why) of documents that are no requests
        if waiting is not None:
            for ident, life, order, request in waiting.requests:
                items.extend((ident, life, order, request))
            for ident, life, why in waiting.malformed:
                items.extend((ident, life, "", ""))  # taken off the group's count, not queued
                bad.append((ident, why))
        settled = run_named(
            self.scripts.script(REFILL),
            {"ready": keys.ready, "waiting": keys.waiting, "frontier": keys.frontier,
             "refilled": keys.named("refilled"), "refill": keys.named("refill")},
            args,
            items=items,
        )  # fmt: skip
        if settled is None:  # its claim ran out and another node's stands: its turn
            return 0
        if waiting is not None:
            bad += [(repr(doc_id)[:200], why) for doc_id, why in waiting.foreign]
            self.store.mark_documents([doc_id for doc_id, _ in waiting.foreign])
        for ident, why in bad:
            error = f"a document in MongoDB is not a request: {why}"
            done.malformed.append(
                {"kind": "overflow", "url": "", "group": group, "id": ident, "error": error}
            )
        texts = [connection.text(part) for part in settled]
        self._settle(keys, group, list(zip(texts[::2], texts[1::2], strict=True)))
        return len(waiting.requests) if waiting is not None else 0

    def _settle(self, keys: SpiderKeys, group: str, lives: list[tuple[str, str]]) -> None:
        """Mark the (id, life) documents back in Redis taken, then forget their marks."""
        if not lives:
            return
        self.store.mark_taken(group, lives)
        marks = (f"{group}\n{ident}\n{life}" for ident, life in lives)
        self.server.hdel(keys.named("refilled"), *marks)

    def recover(self, keys: SpiderKeys, done: Turn, heard_until: float | None = None) -> int:
        """Finish what nodes that died (or this node, in an earlier turn cut
        short) left half done: spill journals and refill marks. How many requests.
        No node is dead for a silence after ``heard_until`` (s since epoch)."""
        heard_ms = now_ms() if heard_until is None else int(heard_until * 1000)
        dead_before = min(heard_ms, now_ms()) - int(self.node_timeout * 1000)
        alive: dict[str, bool] = {}

        def is_dead(node: str) -> bool:
            if node == self.node_id:
                return True  # no turn of this node runs now: what it left is over
            if node not in alive:
                beat = self.server.zscore(keys.nodes, node)
                alive[node] = beat is not None and beat >= dead_before
            return not alive[node]

        recovered = 0
        for raw_node in self.server.zrange(keys.named("spillers"), 0, -1):
            node = connection.text(raw_node)
            if node != self.node_id and is_dead(node):
                batch = cast(
                    "list[bytes]", self.server.lrange(keys.named("spilling", node=node), 0, -1)
                )
                recovered += self._write(keys, node, batch, done)
                logger.info("wrote the spill batch node %s left (%d requests)", node, len(batch))
        marks: dict[str, list[tuple[str, str]]] = defaultdict(list)
        for raw_mark, raw_node in self.server.hgetall(keys.named("refilled")).items():
            if is_dead(connection.text(raw_node)):
                parts = connection.text(raw_mark).split("\n")
                if len(parts) == 3:  # GROUP, ID, LIFE (a group holds no newline)
                    marks[parts[0]].append((parts[1], parts[2]))
        for group, lives in marks.items():
            self._settle(keys, group, lives)
            recovered += len(lives)
        return recovered
