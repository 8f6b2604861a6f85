"""What a scheduler does for the cluster besides handing out requests: when an
idle node asks Redis again and wakes its engine (``Polling``); its heartbeat and
checkpoint, returning dead nodes' leases, the cluster-wide log line, and deciding
when the crawl is over (``ClusterDuties``: a node closes only when the whole
cluster's frontier has stayed empty for ``MAX_IDLE_TIME_BEFORE_CLOSE`` seconds)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import redis
from scrapy.exceptions import DontCloseSpider
from twisted.internet import reactor as _reactor
from twisted.internet import threads
from twisted.python.failure import Failure

from extensions import engine
from extensions.frontier.start_urls import reads_start_urls

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler
    from twisted.internet.base import DelayedCall

    from extensions.cluster.checkpoint import Checkpoint
    from extensions.connection import RedisHealth
    from extensions.frontier.crawls import Crawls
    from extensions.frontier.frontier import Frontier
    from extensions.frontier.results import FrontierSizes
    from extensions.frontier.schedconfig import SchedulerConfig
    from extensions.frontier.start_urls import StartEntryTracker
    from extensions.recrawl.statusstore import MongoStatusStore

logger = logging.getLogger(__name__)
RENDER_WAIT_LOG_INTERVAL = 60.0  # seconds between "render work waits" lines
reactor: Any = _reactor  # Twisted types the installed reactor poorly


class Polling:
    """When a node with an empty buffer asks Redis again: at once while there is
    work, backing off from ``idle_poll_min`` to ``idle_poll_max`` while there is
    none; the engine is woken then, so it does not wait for its own 5 s heartbeat."""

    def __init__(self, crawler: Crawler, poll_min: float, poll_max: float):
        self.crawler = crawler
        self.poll_min = poll_min
        self.poll_max = poll_max
        self._delay = poll_min
        self._next = 0.0  # monotonic time of the next look
        self._wake_call: DelayedCall | None = None

    def due(self, now: float) -> bool:
        return now >= self._next

    def work_found(self) -> None:
        """New work is in the queue: the back-off must not delay it."""
        self._delay = self.poll_min
        self._next = 0.0

    def look_again_now(self) -> None:
        """Somewhere not yet looked at may have work: no back-off yet."""
        self._next = 0.0
        self.wake_in(0)

    def back_off(self, now: float, next_due: float | None) -> None:
        """Nothing found: look again later, but no later than the next parked
        request is due (``next_due``, a wall-clock time)."""
        delay = self._delay
        if next_due is not None:
            delay = min(delay, max(next_due - time.time(), 0.005))
        self._next = now + delay
        self.wake_in(delay)
        self._delay = min(self._delay * 2, self.poll_max)

    def wake_in(self, delay: float) -> None:
        if self._wake_call is not None and self._wake_call.active():
            if self._wake_call.getTime() > reactor.seconds() + delay:
                self._wake_call.reset(delay)  # something is due sooner than planned
            return
        self._wake_call = reactor.callLater(delay, engine.wake, self.crawler)

    def cancel(self) -> None:
        if self._wake_call is not None and self._wake_call.active():
            self._wake_call.cancel()


class ClusterDuties:
    """The scheduler's work for the cluster. What it needs of the scheduler is
    passed in: ``flush`` writes what the scheduler holds, ``unwritten`` says
    whether anything is still held, ``forget_sent`` empties its local filter."""

    def __init__(
        self,
        crawler: Crawler,
        config: SchedulerConfig,
        frontier: Frontier,
        checkpoint: Checkpoint,
        health: RedisHealth,
        start_entries: StartEntryTracker,
        status_store: MongoStatusStore | None,
        polling: Polling,
        crawls: Crawls,
        *,
        flush: Callable[[], object],
        unwritten: Callable[[], bool],
        forget_sent: Callable[[], None],
    ):
        self.crawler = crawler
        self.stats = crawler.stats
        self.config = config
        self.frontier = frontier
        self.checkpoint = checkpoint
        self.health = health
        self.start_entries = start_entries
        self.status_store = status_store
        self.polling = polling
        self.crawls = crawls
        self.flush = flush
        self.unwritten = unwritten
        self.forget_sent = forget_sent
        self._feeding = False
        self._idle_since: float | None = None
        self._render_said = -RENDER_WAIT_LOG_INTERVAL
        self._last_cluster_log = time.monotonic()

    # --- joining and leaving the crawl ------------------------------------------

    def join(self, spider: Spider) -> None:
        """This node's first heartbeat; the leases of nodes that are gone go back
        to the queue before it leases anything."""
        self.checkpoint.write(self.stats)
        reclaimed: dict[str, int] = {}
        for node in self.checkpoint.dead_local_nodes():
            reclaimed.update(self.reclaim(closing_node=node))
        reclaimed.update(self.reclaim())
        sizes = self.frontier.sizes()
        if sizes.seen:
            progress = self.checkpoint.crawl_progress()
            from_nodes = ", ".join(f"{n} from node {node}" for node, n in reclaimed.items())
            logger.info(
                "resuming %s: %d done, %d items, %d queued, %d in flight, %d delayed, "
                "%d dead-lettered%s",
                spider.name, progress.get("pages", 0), progress.get("items", 0),
                sizes.queued, sizes.in_flight, sizes.delayed, sizes.dlq,
                f"; {from_nodes} leases reclaimed" if from_nodes else "",
            )  # fmt: skip

    def leave(self, reason: str) -> None:
        """Whatever this node still holds (its local buffer, requests cut short
        by a forced stop) goes back to the queue at once."""
        node_id = self.checkpoint.node_id
        try:
            returned = self.frontier.reclaim(
                self.config.node_timeout,
                closing_node=node_id,
                forget_after=self.config.node_forget_after,
            )
            if returned.requests.get(node_id):
                logger.info("returned %d unfinished requests to the queue",
                            returned.requests[node_id])  # fmt: skip
            if returned.start_urls.get(node_id):
                logger.info("returned %d start URL entries to the start list",
                            returned.start_urls[node_id])  # fmt: skip
            self.checkpoint.write(self.stats, state="closed")
            if not self.config.persist and reason == "finished":
                # Only a finished crawl is wiped: a node stopped mid-crawl must
                # not take the others' work with it.
                self.frontier.clear()
        except redis.RedisError as exc:
            logger.error(
                "could not hand back this node's leases (%s); they return to the queue "
                "once its heartbeat is %ss old",
                exc,
                self.config.node_timeout,
            )

    # --- heartbeat, reclaim, idle ----------------------------------------------

    def heartbeat(self) -> None:
        try:
            sizes = self.frontier.sizes(in_turn=True)
            self.checkpoint.write(self.stats, sizes)
            self.reclaim(in_turn=True)
            self._end_crawls()
            self._feed_due()
            if time.monotonic() - self._last_cluster_log >= self.config.log_interval:
                self._log_cluster(sizes)
        except redis.RedisError as exc:
            self.health.failed(exc)
        else:
            self.health.ok()

    def _end_crawls(self) -> None:
        """Crawls whose expiry passed stop (any node, each once); a stopped one
        whose emptying was cut short is emptied further."""
        for crawl, state, removed in self.crawls.end_due():
            if state == "expired":
                logger.info("crawl %s expired: %d queued requests removed", crawl, removed)
                self.stats.inc_value("crawls/expired")
            if removed:
                self.stats.inc_value("crawls/removed", removed)

    def _feed_due(self) -> None:
        """Pages due for a recrawl back into the queue (any node, each once)."""
        if self.status_store is not None:
            if not self._feeding:  # one feed at a time, in a worker thread
                self._feeding = True
                fed = threads.deferToThread(
                    self.status_store.feed,
                    self.frontier,
                    self.config.recrawl_feed_batch,
                    self.config.recrawl_claim_timeout,
                )
                fed.addBoth(self._fed)
            return
        self._fed(self.frontier.feed_due(self.config.recrawl_feed_batch))

    def _fed(self, result: Any) -> None:
        self._feeding = False
        if isinstance(result, Failure):
            # the claimed pages are due again after RECRAWL_CLAIM_TIMEOUT
            logger.warning("moving due pages into the queue failed: %s", result.getErrorMessage())
            self.stats.inc_value("recrawl/feed_errors")
            return
        if result:
            self.stats.inc_value("recrawl/queued", result)
            self.polling.work_found()
            engine.wake(self.crawler)

    def _log_cluster(self, sizes: FrontierSizes) -> None:
        """Scrapy's LogStats line speaks for this node; this one for the cluster."""
        self._last_cluster_log = time.monotonic()
        done = int(self.checkpoint.crawl_progress().get("done", 0))
        alive = self.checkpoint.nodes_alive(self.config.node_timeout)
        share = f" ({100 * done / sizes.seen:.0f}%)" if sizes.seen else ""
        logger.info(
            "cluster: %d done of %d discovered%s, %d queued, %d in flight, %d delayed, "
            "%d dead-lettered; %d nodes alive",
            done, sizes.seen, share, sizes.queued, sizes.in_flight, sizes.delayed, sizes.dlq,
            alive,
        )  # fmt: skip

    def reclaim(self, closing_node: str = "", in_turn: bool = False) -> dict[str, int]:
        """Reclaim; returns {node: requests returned to the queue}."""
        returned = self.frontier.reclaim(
            self.config.node_timeout,
            closing_node=closing_node,
            forget_after=self.config.node_forget_after,
            in_turn=in_turn,
        )
        for node, count in returned.start_urls.items():
            logger.warning(
                "returned %d start URL entries taken by node %s to the start list", count, node
            )
            self.stats.inc_value("start_urls/reclaimed", count)
        for node, count in returned.requests.items():
            logger.warning("returned %d requests leased by node %s to the queue", count, node)
            self.stats.inc_value("frontier/reclaimed", count)
        if returned:
            self.polling.work_found()
            engine.wake(self.crawler)
        return returned.requests

    def on_spider_idle(self, spider: Spider) -> None:
        abandoned = self.start_entries.abandon_open()
        if abandoned:
            # Idle means nothing is on its way to this scheduler any more.
            logger.warning(
                "%d start URL entries made requests that never reached the scheduler "
                "(a spider middleware dropped them)",
                abandoned,
            )
            self.stats.inc_value("start_urls/dropped_before_queue", abandoned)
        self.flush()
        try:
            sizes = self.frontier.sizes()
        except redis.RedisError as exc:
            self.health.failed(exc)
            raise DontCloseSpider from None
        now = time.monotonic()
        # paused crawls' work is not work a node can do: whether it waits for their
        # resume follows MAX_IDLE_TIME_BEFORE_CLOSE like any idle spell
        try:
            pending = sizes.pending - self.crawls.paused_pending(sizes) if sizes.pending else 0
        except redis.RedisError as exc:
            self.health.failed(exc)
            raise DontCloseSpider from None
        if sizes.render_queued and not self.checkpoint.renders:
            pending = self._render_wait(pending, sizes.render_queued, now)
        if pending > 0 or self.unwritten() or len(self.start_entries):
            self._idle_since = None
            raise DontCloseSpider
        if self._idle_since is None:
            self._idle_since = now
            logger.info("the crawl of %s has no work left anywhere in the cluster", spider.name)
            # The crawl is over: from here on the shared dupefilter alone decides,
            # so a recrawl after someone cleared it is not dropped on this node.
            self.forget_sent()
        close_after = self.close_after(spider)
        if close_after is None or now - self._idle_since < close_after:
            logger.debug("no work anywhere; looking again in %.2f s", self.config.idle_poll_max)
            self.polling.wake_in(self.config.idle_poll_max)
            raise DontCloseSpider

    def _render_wait(self, pending: int, render_queued: int, now: float) -> int:
        """The pending work a node that cannot render waits for: all of it
        (RENDER_WAIT_FOR_NODES), or all but the render work."""
        if now - self._render_said >= RENDER_WAIT_LOG_INTERVAL and pending <= render_queued:
            self._render_said = now
            logger.info(
                "%d render requests wait for a render node (this node cannot render)%s",
                render_queued,
                "" if self.config.render_wait_for_nodes else ": not waiting for them",
            )
        if self.config.render_wait_for_nodes:
            return pending
        return max(0, pending - render_queued)

    def close_after(self, spider: Spider) -> float | None:
        """Seconds the cluster must stay idle before this node closes; None = never.

        MAX_IDLE_TIME_BEFORE_CLOSE as in scrapy-redis: 0 keeps a spider that
        reads start URLs from Redis waiting for more, a negative value closes at
        once; a spider that does not read them closes when the work is done.
        """
        if self.config.max_idle_time > 0:
            return self.config.max_idle_time
        if self.config.max_idle_time < 0 or not reads_start_urls(type(spider)):
            return 0.0
        return None
