"""``/healthz`` and ``/readyz`` of a node, served next to its metrics.

* ``/healthz`` (liveness): the reactor turns (a tick less than
  ``HEALTH_REACTOR_TIMEOUT`` seconds old), Redis answered within the last
  ``HEALTH_REDIS_GRACE`` seconds, and the node is not stalled: no response for
  ``NODE_STALL_TIME`` seconds while work waits (in the frontier, or leased to
  this node). A failing
  liveness probe gets the node restarted, so a short Redis outage (a failover,
  a restart) only makes the node not ready.
* ``/readyz`` (readiness): the spider is open and Redis answers now.

Each answers 200 with ``ok``, or 503 with one line per failed check. The checks
run in the HTTP server's thread with their own Redis connection: a probe never
waits for the reactor, which is what it is checking.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

import redis
from scrapy import signals
from twisted.internet import task

from extensions.frontier.frontier import Frontier

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from extensions.keys import SpiderKeys

logger = logging.getLogger(__name__)

TICK_INTERVAL = 1.0  # seconds between the reactor's proofs of life


class NodeHealth:
    def __init__(self, crawler: Crawler, server: redis.Redis, keys: SpiderKeys, node_id: str):
        s = crawler.settings
        self.server = server
        self.keys = keys
        self.node_id = node_id
        self.reactor_timeout = s.getfloat("HEALTH_REACTOR_TIMEOUT")
        self.redis_grace = s.getfloat("HEALTH_REDIS_GRACE")
        self.stall_time = s.getfloat("NODE_STALL_TIME")
        now = time.monotonic()
        self.last_tick = now
        self.last_progress = now
        self.redis_reached = now
        self.opened = False
        self._lock = threading.Lock()  # probes may come in parallel
        self._ticker = task.LoopingCall(self._tick)
        crawler.signals.connect(self._opened, signal=signals.spider_opened)
        crawler.signals.connect(self._closed, signal=signals.spider_closed)
        crawler.signals.connect(self._progress, signal=signals.response_received)

    def _opened(self) -> None:
        self.opened = True
        self.last_progress = time.monotonic()
        self._ticker.start(TICK_INTERVAL)

    def _closed(self) -> None:
        self.opened = False
        if self._ticker.running:
            self._ticker.stop()

    def _tick(self) -> None:
        self.last_tick = time.monotonic()

    def _progress(self) -> None:
        self.last_progress = time.monotonic()

    def _redis_problem(self) -> str | None:
        try:
            self.server.ping()
        except redis.RedisError as exc:
            return f"Redis does not answer: {exc}"
        self.redis_reached = time.monotonic()
        return None

    def liveness(self) -> list[str]:
        """What is wrong with the node, for ``/healthz``; empty when healthy."""
        with self._lock:
            now = time.monotonic()
            problems = []
            if self.opened and now - self.last_tick > self.reactor_timeout:
                problems.append(
                    f"the reactor has not turned for {now - self.last_tick:.0f}s "
                    f"(HEALTH_REACTOR_TIMEOUT={self.reactor_timeout:.0f})"
                )
            redis_problem = self._redis_problem()
            if redis_problem and now - self.redis_reached > self.redis_grace:
                problems.append(
                    f"{redis_problem} (for {now - self.redis_reached:.0f}s, "
                    f"HEALTH_REDIS_GRACE={self.redis_grace:.0f})"
                )
            idle = now - self.last_progress
            if self.opened and not redis_problem and idle > self.stall_time:
                try:
                    sizes = Frontier(self.server, self.keys, node_id="").sizes()
                    held = sum(
                        int(self.server.zcard(shard.leases(self.node_id)))
                        for shard in self.keys.all_shards()
                    )
                except redis.RedisError:
                    sizes, held = None, 0
                waiting = sizes and sizes.queued + sizes.delayed + sizes.start_urls + held
                if sizes is not None and not waiting:
                    # idle with nothing to do: the stall clock starts when work appears
                    self.last_progress = now
                elif waiting:
                    problems.append(
                        f"stalled: no response for {idle:.0f}s while work waits "
                        f"(NODE_STALL_TIME={self.stall_time:.0f})"
                    )
            return problems

    def readiness(self) -> list[str]:
        """Why the node should get no work now, for ``/readyz``; empty when ready."""
        with self._lock:
            problems = [] if self.opened else ["the spider is not open"]
            redis_problem = self._redis_problem()
            if redis_problem:
                problems.append(redis_problem)
            return problems
