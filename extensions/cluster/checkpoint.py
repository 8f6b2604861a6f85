"""Who is crawling and how far the crawl is: heartbeats, per-node progress and
the crawl's checkpoint in Redis.

Each heartbeat writes, in one transaction, this node's score in ``NAME:nodes``,
its record ``NAME:node:ID`` (with its memory and version), its share of the
crawl-wide counters in ``NAME:checkpoint`` (added as deltas, so any number of
nodes can write) and of the minute's figures in ``NAME:series``.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
from typing import TYPE_CHECKING, Any

import redis

import extensions
from extensions import clock, connection
from extensions.cluster import series
from extensions.crawlid import ITEMS_WITHOUT_ID
from extensions.runtime import runtime_of

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

    from extensions.keys import SpiderKeys


HOST = socket.gethostname()
REGISTRY_FORGET_MS = 86_400_000
# what pages said of themselves (spidermiddlewares/robotsmeta.py), for the crawl:
# the checkpoint's field -> the node's stat
PAGES_SAID = {"noindex": "robots/noindex_pages", "nofollow": "robots/nofollow_pages"}


def make_node_id(configured: str = "") -> str:
    """``NODE_ID`` if set, else host-pid-random (a restarted node is a new node)."""
    if configured:
        return configured
    return f"{HOST}-{os.getpid()}-{secrets.token_hex(2)}"


def node_id_for(crawler: Crawler) -> str:
    """The node id of this crawler, the same for every component that asks."""
    runtime = runtime_of(crawler)
    if runtime.node_id is None:
        runtime.node_id = make_node_id(crawler.settings.get("NODE_ID", ""))
    return runtime.node_id


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by someone else
        return True
    return True


def resident_memory() -> int:
    """This process's resident memory in bytes (0 where /proc cannot tell)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def now_ms() -> int:
    """The time as the frontier's scripts and the node registry count it:
    Redis's clock (``extensions/clock.py``)."""
    return clock.now_ms()


class Checkpoint:
    """Writes this node's heartbeat and progress, and the crawl's checkpoint."""

    def __init__(
        self, server: redis.Redis, keys: SpiderKeys, node_id: str, series_hours: float = 0.0
    ):
        self.server = server
        self.keys = keys
        self.node_id = node_id
        self.key = keys.node(node_id)
        try:
            clock.measure_server(server)
        except redis.RedisError as exc:  # measured again at each heartbeat
            logger.debug("the frontier's clock not read at start: %s", exc)
        self.started = clock.now()
        self._reported = {"pages": 0, "items": 0, "items_no_id": 0}
        self._pages_said: dict[str, int] = dict.fromkeys(PAGES_SAID, 0)
        #: SERIES_HOURS: the window of NAME:series this node adds to (0: none)
        self.series_hours = series_hours
        self._errors_reported = 0
        #: more fields for this node's record at each heartbeat (the scheduler's backlog)
        self.extra: Callable[[], dict[str, int]] = dict
        if series_hours and node_id:
            try:
                series.sweep(server, keys.series, self.started, series_hours)
            except redis.RedisError as exc:  # housekeeping: a node starts without it
                logger.debug("the console's series not swept at start: %s", exc)
        self._last_progress = self.started
        #: sorted sets this node's heartbeats go into besides NAME:nodes (a render
        #: node's NAME:render_nodes): a part's, through its context
        self.registries: list[str] = []

    def write(
        self,
        stats: StatsCollector | None,
        sizes: dict[str, int] | None = None,
        state: str = "running",
    ) -> None:
        values = stats.get_stats() if stats is not None else {}
        progress: dict[Any, Any] = {
            "pages": int(values.get("response_received_count", 0)),
            "items": int(values.get("item_scraped_count", 0)),
            "items_no_id": int(values.get(ITEMS_WITHOUT_ID, 0)),
        }
        errors = sum(int(values.get(name, 0)) for name in series.ERROR_STATS)
        now = clock.now()
        if progress["pages"] > self._reported["pages"]:
            self._last_progress = now
        # this node's clock measured at each beat (extensions/clock.py); on its own,
        # as a Redis Cluster's pipelines refuse TIME
        clock.measure_server(self.server)
        pipe = self.server.pipeline(transaction=True)
        pipe.zadd(self.keys.nodes, {self.node_id: now_ms()})
        record: dict[Any, Any] = {**progress, **self.extra()}
        pipe.hset(
            self.key,
            mapping={
                "host": HOST, "pid": os.getpid(), "state": state,
                "started": self.started, "last_beat": now,
                "last_progress": self._last_progress,
                "rss": resident_memory(), "version": extensions.__version__,
                "skew_ms": int(clock.skew() * 1000), **record,
            },
        )  # fmt: skip
        for registry in self.registries:
            if state == "closed":
                pipe.zrem(registry, self.node_id)
                continue
            pipe.zadd(registry, {self.node_id: now_ms()})
            # nodes gone a day are forgotten by the others' heartbeats
            pipe.zremrangebyscore(registry, 0, now_ms() - REGISTRY_FORGET_MS)
        pipe.hsetnx(self.keys.checkpoint, "started", now)
        crawl: dict[Any, Any] = {"updated": now}
        if sizes is not None:  # the crawl's sizes (frontier.results.FrontierSizes.recorded)
            crawl.update(sizes)
        pipe.hset(self.keys.checkpoint, mapping=crawl)
        deltas = {name: max(value - self._reported[name], 0) for name, value in progress.items()}
        for name, delta in deltas.items():
            # (items_no_id even at 0: the crawl without an id shows the count from then on)
            if delta or name == "items_no_id":
                pipe.hincrby(self.keys.checkpoint, name, delta)
        said = {field: int(values.get(stat, 0)) for field, stat in PAGES_SAID.items()}
        for field, value in said.items():
            if value > self._pages_said[field]:
                pipe.hincrby(self.keys.checkpoint, field, value - self._pages_said[field])
        if self.series_hours:
            charted = {kind: deltas.get(kind, 0) for kind in series.KINDS}
            charted["errors"] = max(errors - self._errors_reported, 0)
            series.add(pipe, self.keys.series, charted, now, self.series_hours)
        pipe.execute()
        self._reported = progress
        self._pages_said = said
        self._errors_reported = errors
        if self.keys.shards > 1:
            # each shard's registry too: its leases go back by what it says
            beats = self.server.pipeline(transaction=False)
            for keys in self.keys.all_shards():
                beats.zadd(keys.nodes, {self.node_id: now_ms()})
            beats.execute()

    def crawl_progress(self) -> dict[str, float]:
        raw = self.server.hgetall(self.keys.checkpoint)
        return {connection.text(k): float(v) for k, v in raw.items()}

    def nodes_alive(self, node_timeout: float) -> int:
        """Nodes whose heartbeat is younger than ``node_timeout`` seconds."""
        since = now_ms() - int(node_timeout * 1000)
        return int(self.server.zcount(self.keys.nodes, since, "+inf"))

    def render_nodes_alive(self, node_timeout: float) -> int:
        """Render nodes whose heartbeat is younger than ``node_timeout`` seconds."""
        since = now_ms() - int(node_timeout * 1000)
        return int(self.server.zcount(self.keys.named("render_nodes"), since, "+inf"))

    def dead_local_nodes(self) -> list[str]:
        """Nodes of this host whose process is gone: their leases need not wait
        for the heartbeat timeout (a node restarted after kill -9 or a reboot)."""
        dead = []
        for raw_id in self.server.zrange(self.keys.nodes, 0, -1):
            node_id = connection.text(raw_id)
            if node_id == self.node_id:
                continue
            host, pid, state = self.server.hmget(self.keys.node(node_id), "host", "pid", "state")
            if host is None or connection.text(host) != HOST or state == b"closed":
                continue
            if pid is not None and int(pid) != os.getpid() and not _pid_alive(int(pid)):
                dead.append(node_id)
        return dead
