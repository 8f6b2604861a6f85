"""What a scheduler does for the cluster besides handing out requests: when an
idle node asks Redis again and wakes its engine (``Polling``); its heartbeat and
checkpoint, returning dead nodes' leases, the cluster-wide log line, and deciding
when the crawl is over (``ClusterDuties``: a node closes only when the whole
cluster's frontier has stayed empty for ``MAX_IDLE_TIME_BEFORE_CLOSE`` seconds)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import redis
from scrapy.exceptions import DontCloseSpider
from twisted.internet import reactor as _reactor

from extensions import clock, engine
from extensions.frontier.start_urls import reads_start_urls
from extensions.frontier.upkeep import Upkeep

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler
    from twisted.internet.base import DelayedCall

    from extensions.cluster.checkpoint import Checkpoint
    from extensions.connection import RedisHealth
    from extensions.frontier.frontier import Frontier
    from extensions.frontier.lostleases import LostLeases
    from extensions.frontier.part import Parts
    from extensions.frontier.results import FrontierSizes
    from extensions.frontier.schedconfig import SchedulerConfig
    from extensions.frontier.start_urls import StartEntryTracker

logger = logging.getLogger(__name__)
reactor: Any = _reactor  # Twisted types the installed reactor poorly


def each_turn(stats: Any, duty: Callable[[], Any]) -> None:
    """A turn of a node's flush or heartbeat: an error it did not expect (a
    record in Redis no node wrote, say) is logged and counted, and the loop
    goes on; stopped, a live node's heartbeat would age until the others took
    its leases and fetched its pages twice."""
    try:
        duty()
    except Exception:
        stats.inc_value("frontier/duty_errors")
        logger.exception("%s failed; it runs again at its next turn", duty.__qualname__)


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
        if now >= self._next:
            return True
        # woken early (by a response, or a wake set for an earlier look): the
        # look still due must keep a wake of its own, or the node sleeps until
        # the engine's 5 s heartbeat while its host's slots pass unused
        self.wake_in(self._next - now)
        return False

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
            delay = min(delay, max(next_due - clock.now(), 0.005))
        self._next = now + delay
        self.wake_in(delay)
        self._delay = min(self._delay * 2, self.poll_max)

    def look_again_in(self, delay: float) -> None:
        """Something is due in ``delay`` seconds (a slot reserved): look then,
        whatever the back-off says."""
        self._next = min(self._next, time.monotonic() + delay)
        self.wake_in(delay)

    def wake_in(self, delay: float) -> None:
        if self._wake_call is not None and self._wake_call.active():
            if self._wake_call.getTime() > reactor.seconds() + delay:
                self._wake_call.reset(delay)  # something is due sooner than planned
            return
        self._wake_call = reactor.callLater(delay, engine.wake, self.crawler)

    def cancel(self) -> None:
        if self._wake_call is not None and self._wake_call.active():
            self._wake_call.cancel()


class NodeSide(NamedTuple):
    """What the cluster duties use of the node, and no more."""

    flush: Callable[[], Any]
    #: every lease member the node holds
    held_leases: Callable[[], set[bytes]]
    #: whether it owes the frontier writes
    owes_writes: Callable[[], bool]
    #: forget the links it sent (the crawl is over: the dupefilter alone decides)
    forget_sent: Callable[[], None]


class ClusterDuties:
    """The node's work for the cluster: joining and leaving, the heartbeat (with
    each part's duty), reclaim, and the idle check."""

    def __init__(
        self,
        crawler: Crawler,
        config: SchedulerConfig,
        frontier: Frontier,
        checkpoint: Checkpoint,
        health: RedisHealth,
        polling: Polling,
        parts: Parts,
        start_entries: StartEntryTracker,
        lost_leases: LostLeases,
        node: NodeSide,
    ):
        self.crawler = crawler
        self.stats = crawler.stats
        self.config = config
        self.frontier = frontier
        self.checkpoint = checkpoint
        self.health = health
        self.start_entries = start_entries
        self.polling = polling
        self.parts = parts
        self.lost_leases = lost_leases
        self.node = node
        self._idle_since: float | None = None
        #: when this node's last beat went in: the silence of others it could hear
        self._beat_in: float | None = None
        self._last_cluster_log = time.monotonic()

    # --- joining and leaving the crawl ------------------------------------------

    def join(self, spider: Spider) -> None:
        """This node's first heartbeat; the leases of nodes that are gone go back
        to the queue before it leases anything."""
        self.checkpoint.write(self.stats)
        self._beat_in = clock.now()
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
                Upkeep(self.frontier).clear()
        except redis.RedisError as exc:
            logger.error(
                "could not hand back this node's leases (%s); they return to the queue "
                "once its heartbeat is %ss old",
                exc,
                self.config.node_timeout,
            )

    # --- heartbeat, reclaim, idle ----------------------------------------------

    def heartbeat(self) -> None:
        sizes = None
        before = self._beat_in
        try:
            try:
                sizes = self.frontier.sizes(in_turn=True)
            finally:
                # the beat goes even when the sizes cannot be read: a live node
                # whose beat stopped would have its leases taken by the others
                self.checkpoint.write(self.stats, sizes.recorded() if sizes else None)
                self._beat_in = clock.now()
                self.stats.set_value("clock/skew_ms", int(clock.skew() * 1000))
            assert sizes is not None
            # after a silence of its own (Redis stalled, this node's loop blocked)
            # the others' beats were as silent: they have a beat's time to speak
            heard = before + self.config.heartbeat_interval if before is not None else None
            self.reclaim(in_turn=True, observed_until=heard)
            if self.lost_leases.give_back(self.node.held_leases):
                self.polling.work_found()
                engine.wake(self.crawler)
            self.parts.call("heartbeat")
            if time.monotonic() - self._last_cluster_log >= self.config.log_interval:
                self._log_cluster(sizes)
        except redis.RedisError as exc:
            self.health.failed(exc)
        else:
            self.health.ok()

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

    def reclaim(
        self, closing_node: str = "", in_turn: bool = False, observed_until: float | None = None
    ) -> dict[str, int]:
        """Reclaim; returns {node: requests returned to the queue}."""
        returned = self.frontier.reclaim(
            self.config.node_timeout,
            closing_node=closing_node,
            forget_after=self.config.node_forget_after,
            in_turn=in_turn,
            observed_until=observed_until,
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
        self.node.flush()
        now = time.monotonic()
        try:
            sizes = self.frontier.sizes()
            pending = self.parts.idle_pending(sizes.pending, sizes, now)
        except redis.RedisError as exc:
            self.health.failed(exc)
            raise DontCloseSpider from None
        if pending > 0 or self.node.owes_writes() or len(self.start_entries):
            self._idle_since = None
            raise DontCloseSpider
        if self._idle_since is None:
            self._idle_since = now
            logger.info("the crawl of %s has no work left anywhere in the cluster", spider.name)
        # The crawl is over: from here on the shared dupefilter alone decides, so a
        # recrawl after someone cleared it is not dropped on this node. At every
        # idle look, not only the first: work pushed and done between two looks
        # (the engine busy, so no look saw it) left its links here too.
        self.node.forget_sent()
        close_after = self.close_after(spider)
        if close_after is None or now - self._idle_since < close_after:
            logger.debug("no work anywhere; looking again in %.2f s", self.config.idle_poll_max)
            self.polling.wake_in(self.config.idle_poll_max)
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
