"""What a scheduler does for the cluster besides handing out requests: its
heartbeat and checkpoint, returning dead nodes' leases, the cluster-wide log
line, waking an idle engine, and deciding when the crawl is over (a node closes
only when the whole cluster's frontier has stayed empty for
``MAX_IDLE_TIME_BEFORE_CLOSE`` seconds)."""

from __future__ import annotations

import logging
import time
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
    from scrapy.statscollectors import StatsCollector
    from twisted.internet.base import DelayedCall

    from extensions.cluster.checkpoint import Checkpoint
    from extensions.connection import RedisHealth
    from extensions.frontier.frontier import Frontier, SentFingerprints
    from extensions.frontier.results import Entry, FrontierSizes, Lease
    from extensions.frontier.schedconfig import SchedulerConfig
    from extensions.frontier.start_urls import StartEntryTracker
    from extensions.keys import SpiderKeys
    from extensions.recrawl.statusstore import MongoStatusStore

logger = logging.getLogger(__name__)
reactor: Any = _reactor  # Twisted types the installed reactor poorly


class ClusterDuties:
    """Mixed into DistributedScheduler, whose state it shares."""

    # set by DistributedScheduler
    config: SchedulerConfig
    crawler: Crawler
    frontier: Frontier
    checkpoint: Checkpoint
    server: redis.Redis
    keys: SpiderKeys
    stats: StatsCollector
    health: RedisHealth
    start_entries: StartEntryTracker
    status_store: MongoStatusStore | None
    _feeding: bool
    _next_poll: float
    _last_cluster_log: float
    _idle_since: float | None
    _wake_call: DelayedCall | None
    _sent: SentFingerprints
    _to_enqueue: list[Entry]
    _to_delay: list[tuple[float, str, bytes]]
    _to_release: list[bytes]

    def flush(self, lease: int = 0) -> tuple[list[Lease], float | None] | None:
        raise NotImplementedError

    def _schedule_wake(self, delay: float) -> None:
        if self._wake_call is not None and self._wake_call.active():
            if self._wake_call.getTime() > reactor.seconds() + delay:
                self._wake_call.reset(delay)  # something is due sooner than planned
            return
        self._wake_call = reactor.callLater(delay, engine.wake, self.crawler)

    # --- heartbeat, reclaim, idle ----------------------------------------------

    def _heartbeat(self) -> None:
        try:
            sizes = self.frontier.sizes(in_turn=True)
            self.checkpoint.write(self.stats, sizes)
            self._reclaim(in_turn=True)
            self._feed_due()
            if time.monotonic() - self._last_cluster_log >= self.config.log_interval:
                self._log_cluster(sizes)
        except redis.RedisError as exc:
            self.health.failed(exc)
        else:
            self.health.ok()

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
            self._next_poll = 0.0
            engine.wake(self.crawler)

    def _log_cluster(self, sizes: FrontierSizes) -> None:
        """Scrapy's LogStats line speaks for this node; this one for the cluster."""
        self._last_cluster_log = time.monotonic()
        done = int(self.checkpoint.crawl_progress().get("done", 0))
        alive = self.server.zcount(
            self.keys.nodes, int((time.time() - self.config.node_timeout) * 1000), "+inf"
        )
        share = f" ({100 * done / sizes.seen:.0f}%)" if sizes.seen else ""
        logger.info(
            "cluster: %d done of %d discovered%s, %d queued, %d in flight, %d delayed, "
            "%d dead-lettered; %d nodes alive",
            done, sizes.seen, share, sizes.queued, sizes.in_flight, sizes.delayed, sizes.dlq,
            alive,
        )  # fmt: skip

    def _reclaim(self, closing_node: str = "", in_turn: bool = False) -> dict[str, int]:
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
            self._next_poll = 0.0
            engine.wake(self.crawler)
        return returned.requests

    def _on_spider_idle(self, spider: Spider) -> None:
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
        if (
            sizes.pending
            or self._to_enqueue
            or self._to_delay
            or self._to_release
            or len(self.start_entries)
        ):
            self._idle_since = None
            raise DontCloseSpider
        if self._idle_since is None:
            self._idle_since = now
            logger.info("the crawl of %s has no work left anywhere in the cluster", spider.name)
            # The crawl is over: from here on the shared dupefilter alone decides,
            # so a recrawl after someone cleared it is not dropped on this node.
            self._sent.clear()
        close_after = self.close_after(spider)
        if close_after is None or now - self._idle_since < close_after:
            logger.debug("no work anywhere; looking again in %.2f s", self.config.idle_poll_max)
            self._schedule_wake(self.config.idle_poll_max)
            raise DontCloseSpider

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
