"""A Scrapy scheduler whose queue is shared by every node through Redis.

What it adds to scrapy-redis's scheduler:

* requests are leased, not popped: a node that dies loses nothing, its leases
  return to the queue once its heartbeat goes stale;
* a lease is released only after the engine is completely done with the
  request (callback run, child requests written to Redis, items through the
  pipelines), in batches, in the same transaction that writes its children;
* requests are JSON (``extensions.frontier.serializer``), never pickle;
* round trips are batched: leases in groups into a local buffer, discovered
  requests checked against the dupefilter and enqueued in one Lua call, and
  links this node already sent dropped before they are even serialized;
* an idle node asks Redis again after 50 ms, backing off to 1 s, instead of
  every 5 s; and it closes only when the whole cluster's frontier has stayed
  empty for ``MAX_IDLE_TIME_BEFORE_CLOSE`` seconds (``frontier/idle.py``);
* what it queues is checked first: the URL policy, priority and delay ranges;
  a start-URL entry's lease is dropped in the transaction that queues its requests.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from typing import TYPE_CHECKING, Any

import redis
from scrapy import signals
from scrapy.core.scheduler import BaseScheduler
from twisted.internet import task

from extensions import compat, connection, engine, sharding
from extensions.cluster.checkpoint import Checkpoint, node_id_for
from extensions.crawlid import crawl_fields, split_group
from extensions.frontier.admission import Admission
from extensions.frontier.backlog import Backlog
from extensions.frontier.commit import Committed, FrontierWrite, commit
from extensions.frontier.counts import FlushCounts
from extensions.frontier.crawls import Crawls
from extensions.frontier.deadletter import DeadLetters
from extensions.frontier.frontier import Frontier
from extensions.frontier.idle import ClusterDuties, Polling
from extensions.frontier.leased import leased_for, requests_of
from extensions.frontier.pending import PendingWrites
from extensions.frontier.results import Lease
from extensions.frontier.schedconfig import SchedulerConfig
from extensions.frontier.sent import SentFingerprints
from extensions.frontier.spilling import Overflow, open_overflow
from extensions.frontier.start_urls import StartLeases, tracker_for
from extensions.frontier.statuses import StatusBatches
from extensions.keys import SpiderKeys
from extensions.meta import CRAWL_ID, HOST_WATCHED, SEND_SLOT, START_ENTRY
from extensions.recrawl.revisits import revisits_for
from extensions.recrawl.statusstore import MongoStatusStore
from extensions.render.policy import RenderPolicy
from extensions.render.setup import RenderRoom, renders_here
from extensions.runtime import runtime_of
from extensions.signals import backlog_full
from extensions.urlpolicy import UrlPolicy

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)


class DistributedScheduler(BaseScheduler):
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
        self._sent = SentFingerprints(config.local_cache)
        self.admission = Admission(
            UrlPolicy.from_settings(crawler.settings),
            crawler.stats,
            self._sent,
            self._dead_letter,
            queue_by=config.queue_by,
            max_delay=config.max_delay,
        )
        self.counts = FlushCounts(crawler.stats, config.host_page_budget)
        # RECRAWL_STORE = "mongo": the store, and the finished requests whose revisit
        # record it has yet to take (their leases wait for it)
        self.status_store: MongoStatusStore | None = None
        self.statuses: StatusBatches | None = None
        #: FRONTIER_OVERFLOW = "mongo": this node's share of moving requests
        #: between the group queues and MongoDB
        self.overflow: Overflow | None = None
        self._closed = False

        self._buffer: deque[tuple[Request, bytes]] = deque()
        self._leased: dict[Request, bytes] = {}
        self.pending = PendingWrites(runtime_of(crawler).crawl_items)
        self.as_leased = leased_for(crawler)
        self.revisits = revisits_for(crawler)
        self.polling = Polling(crawler, config.idle_poll_min, config.idle_poll_max)
        #: the render requests this node may lease (none if it cannot render)
        pages = config.render_max_pages if renders_here(crawler.settings) else 0
        self.render_room = RenderRoom(pages, self.polling.look_again_now)
        self.backlog = Backlog(
            config.max_unconfirmed, crawler.stats, self.polling.look_again_now,
            lambda: crawler.signals.send_catch_log(signal=backlog_full),
        )  # fmt: skip
        self._loops: list[task.LoopingCall] = []

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> DistributedScheduler:
        config = SchedulerConfig.from_settings(crawler.settings)
        server = connection.client_for(crawler, ping=True)
        return cls(server, crawler, node_id=node_id_for(crawler), config=config)

    # --- lifecycle ------------------------------------------------------------

    def open(self, spider: Spider) -> None:
        seam = engine.seam_problem()
        if seam:  # the crawl command refuses this earlier, with one line
            raise RuntimeError(seam)
        compat.settle_allowed_domains(spider)  # before the offsite check first reads it
        self.spider = spider
        self.keys = SpiderKeys.for_crawler(self.crawler)
        self.frontier = Frontier(
            self.server,
            self.keys,
            self.node_id,
            self.config.bloom,
            budget=self.config.host_page_budget,
            crawl_delay_max=self.config.crawl_delay_max,
            send_tolerance=self.config.send_tolerance,
        )
        self.dead_letters = DeadLetters(self.server, self.keys.dlq, self.node_id)
        self.checkpoint = Checkpoint(
            self.server, self.keys, self.node_id, series_hours=self.config.series_hours
        )
        self.checkpoint.renders = self.render_room.pages > 0
        self.checkpoint.extra = lambda: {
            "unconfirmed": self.backlog.held, "held_back": int(self.backlog.held_back),
            "spill_held": int(self.overflow is not None and self.overflow.holding),
        }  # fmt: skip
        self.admission.render = RenderPolicy.from_crawler(self.crawler)
        self.crawls = Crawls(self.server, self.keys)
        self.start_leases = StartLeases(self.server, self.keys, self.node_id)
        if self.config.recrawl_store == "mongo":
            self.status_store = MongoStatusStore.from_settings(
                self.crawler.settings, spider.name, self.node_id
            )
            self.statuses = StatusBatches(self.status_store, self.stats, self._status_stored)
            logger.info("pages kept for a recrawl go to %s", self.status_store.describe())
        if self.config.flush_on_start:
            self.frontier.clear()
            logger.info("SCHEDULER_FLUSH_ON_START: cleared the crawl state of %s", spider.name)
        self.duties = ClusterDuties(
            self.crawler,
            self.config,
            self.frontier,
            self.checkpoint,
            self.health,
            self.start_entries,
            self.status_store,
            self.polling,
            self.crawls,
            flush=self.flush,
            unwritten=self.pending.unwritten,
            forget_sent=self._sent.clear,
        )
        sharding.record_shards(self.server, self.keys)
        # before anything reads the crawl's state (leases handed back too)
        self.frontier.upgrade_crawl(self.config.queue_by)
        self.fingerprinter = compat.fingerprinter_for(self.server, self.keys, self.fingerprinter)
        self.duties.join(spider)
        self.overflow = open_overflow(
            self.server, self.frontier, self.config, self.crawler.settings, spider.name,
            stats=self.stats, dead_letter=self._dead_letter, resumed=self.polling.look_again_now,
        )  # fmt: skip
        logger.info("node %s joined the crawl of %s", self.node_id, spider.name)
        self.crawler.signals.connect(self.duties.on_spider_idle, signal=signals.spider_idle)
        if self.render_room.pages:
            self.crawler.signals.connect(self.render_room.left, signals.request_left_downloader)
        for interval, func in (
            (self.config.release_interval, self.flush),
            (self.config.heartbeat_interval, self.duties.heartbeat),
        ):
            loop = task.LoopingCall(func)
            loop.start(interval, now=False)
            self._loops.append(loop)

    def close(self, reason: str) -> None:
        for loop in self._loops:
            if loop.running:
                loop.stop()
        if self.overflow is not None:
            self.overflow.close()
        self.polling.cancel()
        # the last pages' recrawl status, before their leases go
        self._collect_finished()
        if self.statuses is not None:
            self.statuses.write_now()
            self.statuses.closed = True
        self._closed = True
        self.flush()
        if self.statuses is not None:
            self.statuses.close()
        self.duties.leave(reason)

    # --- the engine's interface -------------------------------------------------

    def has_pending_requests(self) -> bool:
        return bool(self._buffer or self.pending.enqueue or self.pending.delay)

    def enqueue_request(self, request: Request) -> bool:
        token = request.meta.pop(START_ENTRY, None)
        # a lease's send slot is its own: a copy queued again gets one at its next lease
        request.meta.pop(SEND_SLOT, None)
        request.meta.pop(HOST_WATCHED, None)
        try:
            return self._enqueue(request, from_start_entry=token is not None)
        finally:
            if token is not None:
                # queued, filtered or dead-lettered: its start entry may go
                self.start_entries.handled(token)

    def _enqueue(self, request: Request, from_start_entry: bool = False) -> bool:
        admitted = self.admission.admit(request, self.spider, self.fingerprinter, from_start_entry)
        if admitted is None:
            return False
        fingerprint, group, priority, data, due = admitted
        crawl = request.meta.get(CRAWL_ID)
        if crawl:
            self._crawl_met(crawl)
        if due is not None:
            self.pending.delay.append((due, group, data))
            self.stats.inc_value("frontier/delayed")
            return True
        self.pending.enqueue.append((fingerprint, group, priority, data))
        self.counts.enqueued += 1
        if len(self.pending.enqueue) >= self.config.enqueue_batch:
            self.flush()
        return True

    def _unconfirmed(self) -> int:
        return len(self._buffer) + len(self._leased) + len(self.pending.release)

    def next_request(self) -> Request | None:
        if not self._buffer:
            self._refill()
            if not self._buffer:
                return None
        request, data = self._buffer.popleft()
        self._leased[request] = data
        self.render_room.took(request)
        self.as_leased.remember(request)
        self.counts.dequeued += 1
        return request

    # --- batching ---------------------------------------------------------------

    def flush(self, lease: int = 0) -> tuple[list[Lease], float | None] | None:
        """Write discovered requests and retries, then release finished leases
        (``commit``: a lease never goes before what its request produced, nor a
        start-URL entry before the requests built from it).

        With ``lease``, that many requests are leased in the same round trip,
        after the writes, and the lease's outcome is returned (None if it failed).
        """
        try:
            return self._flush(lease)
        finally:
            self.backlog.settled(self._unconfirmed())

    def _flush(self, lease: int) -> tuple[list[Lease], float | None] | None:
        self.counts.tell(self.frontier)
        self._collect_finished()
        if self.statuses is not None:
            self.statuses.write()
        write = self.pending.write(
            self.start_entries.take_done(), lease, self.render_room.room() if lease else 0
        )
        if not write.writes_anything:
            # the lease alone: a Redis error reaches the caller (_refill)
            if not lease:
                return None
            return self.frontier.lease(lease, self.config.lease_timeout, write.render_lease)
        return self._settle(write, commit(self.frontier, write, self.config.lease_timeout))

    def _settle(
        self, write: FrontierWrite, result: Committed
    ) -> tuple[list[Lease], float | None] | None:
        """Take out of the buffers what went in; what did not waits for the next
        flush (a refused entry is written alone and dead-lettered)."""
        # written again (writes not settled), what is in already counts as filtered
        added = result.added if result.writes_in and write.enqueue else None
        if added is not None and self.counts.added(len(write.enqueue), added):
            self.polling.work_found()
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
                self.frontier, write, result.error, self._dead_letter
            )
            if refused:
                self.stats.inc_value("frontier/refused_by_redis", refused)
        else:
            self.health.failed(result.error)
        return result.leased

    def _collect_finished(self) -> None:
        in_progress = engine.requests_in_progress(self.crawler)
        if in_progress is None or not self._leased:
            return
        finished = [request for request in self._leased if request not in in_progress]
        for request in finished:
            member = self._leased.pop(request)
            self.render_room.left(request)
            self.pending.finish(request, member, self.revisits, self.statuses)

    def _crawl_met(self, crawl: str) -> None:
        try:
            self.crawls.ensure(crawl)
        except redis.RedisError as exc:  # registered by the next request of it
            self.health.failed(exc)

    def _status_stored(self, members: list[bytes], unmarks: list[tuple[str, str]]) -> None:
        self.pending.release += members
        self.pending.unmark += unmarks

    def _refill(self) -> None:
        now = time.monotonic()
        if not self.polling.due(now):
            return
        items: list[Lease] = []
        next_due = None
        outcome = None
        if self._unconfirmed() >= self.backlog.limit:
            self._collect_finished()  # near the bound: what finished since the last flush
        room = min(self.config.fetch_batch, self.backlog.room(self._unconfirmed()))
        if self.overflow is not None and self.overflow.holding:
            room = 0  # MongoDB cannot take spills: the crawl waits (it wakes the node)
        if not room:  # the backlog's release wakes the node: no back-off meanwhile
            self.flush()
            return
        try:
            # the writes waiting and the lease in one round trip
            outcome = self.flush(lease=room)
        except redis.RedisError as exc:  # the lease alone, with nothing to write
            self.health.failed(exc)
        else:
            if outcome is not None:
                items, next_due = outcome
                self.health.ok()
        requests, unreadable = requests_of(items, self.spider)
        self._buffer.extend(requests)
        for member, url, error, raw in unreadable:
            logger.error("dead-lettering an unreadable queue entry: %s", error)
            self.stats.inc_value("frontier/unreadable")
            group = connection.text(member.partition(b"\n")[0])
            crawl = crawl_fields(split_group(group)[1])
            self._dead_letter(kind="unreadable", url=url, error=error, raw=raw, **crawl)
            self.pending.release.append(member)
        if items:
            self.stats.inc_value("frontier/leased", len(items))
            self.polling.work_found()
        elif outcome is not None and not self.frontier.looked_everywhere:
            self.polling.look_again_now()  # the next shards may have work
        else:
            self.polling.back_off(now, next_due)

    def _dead_letter(self, **record: Any) -> None:
        try:
            self.dead_letters.add(**record)
        except redis.RedisError as exc:
            logger.error("could not write to the dead-letter queue: %s (record: %s)", exc, record)
