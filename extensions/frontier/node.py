"""One node's side of the shared frontier: what it leased and holds, what it owes
Redis, and the flush that pays it; the scheduler (``scheduler.py``) is Scrapy's
face of it, and the capabilities a crawl may have are parts (``part.py``), each
given a ``PartContext`` (``context.py``), never the node.

* requests are leased, not popped: a node that dies loses nothing, its leases
  return to the queue once its heartbeat goes stale (``idle.py``);
* a lease is released only after the engine is completely done with the
  request (callback run, child requests written to Redis, items through the
  pipelines), in batches, in the same transaction that writes its children;
* round trips are batched: leases in groups into a local buffer, discovered
  requests checked (``admission.py``) and enqueued in one Lua call; a start
  entry's lease is dropped in the transaction that queues its requests.
"""

from __future__ import annotations

import itertools
import logging
import os
import time
from collections import deque
from typing import TYPE_CHECKING, Any

import redis
from scrapy import signals
from scrapy.utils.request import RequestFingerprinter
from twisted.internet import task

from extensions import compat, connection, engine, sharding
from extensions.cluster.checkpoint import Checkpoint, now_ms
from extensions.frontier.admission import Admission
from extensions.frontier.backlog import Backlog
from extensions.frontier.commit import Committed, FrontierWrite, commit
from extensions.frontier.context import ExtensionPoints, PartContext
from extensions.frontier.counts import FlushCounts
from extensions.frontier.deadletter import DeadLetters
from extensions.frontier.frontier import Frontier
from extensions.frontier.idle import ClusterDuties, NodeSide, Polling, each_turn
from extensions.frontier.leased import (
    dead_letter_unreadable,
    leased_for,
    refused_now,
    requests_of,
)
from extensions.frontier.lostleases import LostLeases
from extensions.frontier.part import build_parts
from extensions.frontier.pending import PendingWrites
from extensions.frontier.results import Lease
from extensions.frontier.sent import sent_for
from extensions.frontier.start_urls import StartLeases, tracker_for
from extensions.frontier.upkeep import Upkeep
from extensions.keys import SpiderKeys
from extensions.runtime import runtime_of
from extensions.signals import backlog_full
from extensions.urlnorm.chain import normalizing_for
from extensions.urlpolicy import UrlPolicy

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler

    from extensions.frontier.schedconfig import SchedulerConfig

logger = logging.getLogger(__name__)


class NodeFrontier:
    def __init__(
        self, server: redis.Redis, crawler: Crawler, *, node_id: str, config: SchedulerConfig
    ):
        self.server = server
        self.crawler = crawler
        self.node_id = node_id
        self.config = config
        self.stats = crawler.stats
        self.health = connection.health_for(crawler)
        # Scrapy's, unless the crawl was carried over from scrapy-redis (see open)
        self.fingerprinter: Any = crawler.request_fingerprinter
        self.start_entries = tracker_for(crawler)
        self._sent = sent_for(crawler)
        #: where the parts meet the core (filled as they are built, at open)
        self.points = ExtensionPoints()
        self.admission = Admission(
            UrlPolicy.from_settings(crawler.settings),
            crawler.stats,
            self._sent,
            self.dead_letter,
            queue_by=config.queue_by,
            max_delay=config.max_delay,
            normalize=normalizing_for(crawler),
        )
        self.admission.checks, self.admission.deciders, self.admission.start_checks = (
            self.points.admission_checks, self.points.admission_deciders,
            self.points.start_entry_checks)  # fmt: skip
        self.counts = FlushCounts(crawler.stats, config.host_page_budget)
        self.buffer: deque[tuple[Request, bytes]] = deque()
        #: requests the engine took and is not done with, and their lease members
        self.leased: dict[Request, bytes] = {}
        self.pending = PendingWrites(self.points.write_sections, self.points.release_gates)
        # a flush's mark: unique across restarts of a node under one NODE_ID
        self._mark_prefix, self._marks = os.urandom(6).hex(), itertools.count()
        self.as_leased = leased_for(crawler)
        self.polling = Polling(crawler, config.idle_poll_min, config.idle_poll_max)
        self.backlog = Backlog(
            config.max_unconfirmed, crawler.stats, self.polling.look_again_now,
            lambda: crawler.signals.send_catch_log(signal=backlog_full),
        )  # fmt: skip
        self.loops: list[task.LoopingCall] = []

    # --- joining and leaving the crawl --------------------------------------------

    def open(self, spider: Spider) -> None:
        self.spider = spider
        self.keys = SpiderKeys.for_crawler(self.crawler)
        config = self.config
        self.frontier = Frontier(
            self.server, self.keys, self.node_id, config.bloom,
            budget=config.host_page_budget, crawl_delay_max=config.crawl_delay_max,
            send_tolerance=config.send_tolerance, host_affinity=config.host_affinity,
            node_timeout=config.node_timeout,
        )  # fmt: skip
        self.dead_letters = DeadLetters(self.server, self.keys.dlq, self.node_id)
        self.checkpoint = Checkpoint(
            self.server, self.keys, self.node_id, series_hours=config.series_hours
        )
        self.start_leases = StartLeases(self.server, self.keys, self.node_id)
        self.lost_leases = LostLeases(self.frontier, config.lease_timeout, self.stats)
        if config.flush_on_start:
            Upkeep(self.frontier).clear()
            logger.info("SCHEDULER_FLUSH_ON_START: cleared the crawl state of %s", spider.name)
        self.checkpoint.registries = self.points.beat_registries
        self.parts = build_parts(self._context(spider))
        self.checkpoint.extra = lambda: {
            "unconfirmed": self.backlog.held, "held_back": int(self.backlog.held_back),
            "store_problem": runtime_of(self.crawler).store_problem,
            **self.parts.checkpoint(),
        }  # fmt: skip
        self.duties = ClusterDuties(
            self.crawler, config, self.frontier, self.checkpoint, self.health, self.polling,
            self.parts, self.start_entries, self.lost_leases,
            NodeSide(self.flush, self.held_leases, self.pending.unwritten, self._sent.clear),
        )  # fmt: skip
        sharding.record_shards(self.server, self.keys)
        # before any script with hook slots runs (reclaiming leftover leases does)
        self.frontier.manifest.join(
            self.parts.pieces(), known=self.parts.declared_pieces, stats=self.stats
        )
        # before anything reads the crawl's state (leases handed back too)
        Upkeep(self.frontier).upgrade_crawl(config.queue_by)
        self.fingerprinter = compat.fingerprinter_for(self.server, self.keys, self.fingerprinter)
        # Scrapy's own fingerprint leaves the fragment out: so may the link path
        self._sent.fragments_matter = type(self.fingerprinter) is not RequestFingerprinter
        self._sent.urls_decide = type(self.fingerprinter) in (
            RequestFingerprinter,
            compat.ScrapyRedisFingerprinter,
        )
        self.duties.join(spider)
        self.parts.call("open", spider)
        logger.info("node %s joined the crawl of %s", self.node_id, spider.name)
        self.crawler.signals.connect(self.duties.on_spider_idle, signal=signals.spider_idle)
        for interval, func in (
            (config.release_interval, self.flush),
            (config.heartbeat_interval, self.duties.heartbeat),
        ):
            loop = task.LoopingCall(each_turn, self.stats, func)
            loop.start(interval, now=False)
            self.loops.append(loop)

    def _context(self, spider: Spider) -> PartContext:
        return PartContext(
            crawler=self.crawler, settings=self.crawler.settings, server=self.server,
            keys=self.keys, node_id=self.node_id, stats=self.stats, health=self.health,
            frontier=self.frontier, spider=spider, wake=self.polling.look_again_now,
            look_again_in=self.polling.look_again_in, work_found=self._work_found,
            dead_letter=self.dead_letter, release=self.pending.release_later,
            lease_failed=self.lost_leases.lease_failed, points=self.points,
        )  # fmt: skip

    def _work_found(self) -> None:
        self.polling.work_found()
        engine.wake(self.crawler)

    def close(self, reason: str) -> None:
        for loop in self.loops:
            if loop.running:
                loop.stop()
        self.polling.cancel()
        self._collect_finished()
        self.parts.call("close")
        self.flush()
        self.parts.call("closed")
        self.duties.leave(reason)

    # --- requests in and out -------------------------------------------------------

    def has_pending(self) -> bool:
        pending = self.pending
        return bool(self.buffer or pending.enqueue or pending.delay or pending.unsure)

    def enqueue(self, request: Request, from_start_entry: bool = False) -> bool:
        admitted = self.admission.admit(request, self.spider, self.fingerprinter, from_start_entry)
        if admitted is None:
            return False
        fingerprint, group, priority, data, due = admitted
        if not data:  # a URL only marked seen (a canonical): no request to count
            self.pending.enqueue.append((fingerprint, group, priority, data))
            self.stats.inc_value("canonical/marked_seen")
            return True
        if self.parts.enqueues:
            self.parts.enqueued(request)
        if due is not None:
            self.pending.delay.append((due, group, data))
            self.stats.inc_value("frontier/delayed")
            return True
        self.pending.enqueue.append((fingerprint, group, priority, data))
        self.counts.enqueued += 1
        if len(self.pending.enqueue) >= self.config.enqueue_batch:
            self.flush()
        return True

    def next_request(self) -> Request | None:
        if not self.buffer:
            self._refill()
        while self.buffer:
            request, data = self.buffer.popleft()
            if self.points.lease_checks and refused_now(request, self.points.lease_checks):
                self.pending.release.append(data)  # not fetched: its lease goes
                continue
            self.leased[request] = data
            if self.parts.takes:
                self.parts.took(request)
            self.as_leased.remember(request, data)
            self.counts.dequeued += 1
            return request
        return None

    def unconfirmed(self) -> int:
        releases = len(self.pending.release) + len(self.pending.unsure_releases())
        return len(self.buffer) + len(self.leased) + releases

    # --- batching --------------------------------------------------------------------

    def flush(self, lease: int = 0) -> tuple[list[Lease], float | None] | None:
        """Write discovered requests and retries, then release finished leases
        (``commit``: a lease never goes before what its request produced, nor a
        start-URL entry before the requests built from it).

        With ``lease``, that many requests (and what the parts' shares ask
        besides: render requests a render node has room for) are leased in the
        same round trip, after the writes, and the lease's outcome is returned
        (None if it failed).
        """
        try:
            return self._flush(lease)
        finally:
            self.backlog.settled(self.unconfirmed())

    def _flush(self, lease: int) -> tuple[list[Lease], float | None] | None:
        self.counts.tell(self.frontier)
        self._collect_finished()
        if self.pending.unsure is not None and not self._resolve_unsure():
            return None
        self.parts.call("before_flush")
        shares = self.parts.lease_shares() if lease else {}
        write = self.pending.write(self.start_entries.take_done(), lease, shares)
        if not write.writes_anything:
            # the lease alone: a Redis error reaches the caller (_refill)
            if not lease:
                return None
            return self.frontier.lease(lease, self.config.lease_timeout, write.lease_shares)
        write.mark = f"{self._mark_prefix}:{next(self._marks)}"
        return self._settle(write, commit(self.frontier, write, self.config.lease_timeout))

    def _resolve_unsure(self) -> bool:
        """Whether the flush whose answer was lost went in, read from its mark;
        False while Redis does not answer (nothing is written meanwhile)."""
        assert self.pending.unsure is not None
        mark = self.pending.unsure.write.mark
        try:
            found = self.frontier.server.get(self.frontier.keys.commit(self.frontier.node_id))
        except redis.RedisError as exc:
            self.health.failed(exc)
            return False
        went_in = found == mark.encode()
        self.start_entries.put_back(self.pending.resolve(went_in))
        outcome = "went_in" if went_in else "written_again"
        self.stats.inc_value(f"frontier/unsure_flushes/{outcome}")
        logger.warning("a flush whose answer was lost %s", outcome.replace("_", " "))
        return True

    def _settle(
        self, write: FrontierWrite, result: Committed
    ) -> tuple[list[Lease], float | None] | None:
        """Take out of the buffers what went in; what did not waits for the next
        flush (a refused entry is written alone and dead-lettered)."""
        # written again (writes not settled), what is in already counts as filtered
        added = result.added if result.writes_in and write.enqueue else None
        if added is not None and self.counts.added(len(write.enqueue), added):
            self._work_found()  # now: mostly its own hosts' links, left to it (affinity)
        if result.unsure and result.error is not None:
            self.pending.set_apart(write)  # in or not: its mark says, at the next flush
            self.health.failed(result.error)
            return None
        self.pending.settle(write, result)
        if result.rest_in and write.release and result.error is None:
            self.stats.inc_value("frontier/released", len(write.release))
        if result.lease_error is not None:
            self.health.failed(result.lease_error)
        if result.error is None:
            self.health.ok()
            return result.leased
        if not result.rest_in:
            self.start_entries.put_back(write.start_acks)  # acknowledged at the next flush
        if result.bad_input and not result.writes_in:
            refused = self.pending.write_one_by_one(
                self.frontier, write, result.error, self.dead_letter
            )
            if refused:
                self.stats.inc_value("frontier/refused_by_redis", refused)
        else:
            self.health.failed(result.error)
        return result.leased

    def _collect_finished(self) -> None:
        in_progress = engine.requests_in_progress(self.crawler)
        if in_progress is None or not self.leased:
            return
        finished = [request for request in self.leased if request not in in_progress]
        for request in finished:
            member = self.leased.pop(request)
            self.parts.call("finished", request)
            self.pending.finish(request, member)

    def _refill(self) -> None:
        now = time.monotonic()
        # the back-off is for a frontier found empty: requests this node found
        # since go in, and may be leased back, at once (the crawl's last pages
        # came up to a second late, at the end of a doubling back-off); with
        # Redis away it holds (a call on the reactor per response would not)
        owed = bool(self.pending.enqueue) and not self.health.is_down
        if not self.polling.due(now) and not owed:
            return
        items: list[Lease] = []
        next_due = None
        outcome = None
        refused_all = False
        if self.unconfirmed() >= self.backlog.limit:
            self._collect_finished()  # near the bound: what finished since the last flush
        room = min(self.config.fetch_batch, self.backlog.room(self.unconfirmed()))
        room = self.parts.lease_room(room)
        if not room:  # the backlog's release (or the part's) wakes the node: no back-off
            self.flush()
            return
        asked = now_ms()
        try:
            # the writes waiting and the lease in one round trip
            outcome = self.flush(lease=room)
        except redis.RedisError as exc:  # the lease alone, with nothing to write
            self.health.failed(exc)
        else:
            if outcome is not None:
                items, next_due = outcome
                self.health.ok()
                given = len(items)
                items = self.parts.admit_leases(items, asked)
                # every lease given back (a level's turn is later): the next
                # lease, at once, finds when the first turn comes
                refused_all = given > 0 and not items
        if outcome is None:  # it may have run, its answer lost: see lostleases.py
            self.lost_leases.lease_failed(asked)
        if outcome is not None:
            self.parts.call("leased")
        requests, unreadable = requests_of(items, self.spider)
        self.buffer.extend(requests)
        if unreadable:
            self.pending.release += dead_letter_unreadable(unreadable, self.dead_letter)
            self.stats.inc_value("frontier/unreadable", len(unreadable))
        if items:
            self.stats.inc_value("frontier/leased", len(items))
            self.polling.work_found()
        elif outcome is not None and (refused_all or not self.frontier.looked_everywhere):
            self.polling.look_again_now()  # the next shards may have work
        else:
            self.polling.back_off(now, next_due)

    def held_leases(self) -> set[bytes]:
        """Every lease member this node holds: buffered, with the engine, or
        finished and not yet released."""
        held = {member for _, member in self.buffer}
        held.update(self.leased.values(), self.pending.release, self.pending.unsure_releases())
        held.update(self.pending.gated())
        return held

    def dead_letter(self, **record: Any) -> None:
        try:
            self.dead_letters.add(**record)
        except redis.RedisError as exc:
            logger.error("could not write to the dead-letter queue: %s (record: %s)", exc, record)
