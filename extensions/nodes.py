"""Who is crawling: node ids and the per-node progress record in Redis."""

from __future__ import annotations

import os
import secrets
import socket
import time
from typing import TYPE_CHECKING

from extensions.frontier import now_ms

if TYPE_CHECKING:
    import redis
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

    from extensions.keys import SpiderKeys


def make_node_id(configured: str = "") -> str:
    """``NODE_ID`` if set, else host-pid-random (a restarted node is a new node)."""
    if configured:
        return configured
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(2)}"


def node_id_for(crawler: Crawler) -> str:
    """The node id of this crawler, the same for every component that asks."""
    node_id = getattr(crawler, "_distributed_node_id", None)
    if node_id is None:
        node_id = make_node_id(crawler.settings.get("NODE_ID", ""))
        crawler._distributed_node_id = node_id  # type: ignore[attr-defined]
    return node_id


class NodeRecord:
    """Writes this node's heartbeat and progress (``NAME:nodes``, ``NAME:node:ID``)."""

    def __init__(self, server: redis.Redis, keys: SpiderKeys, node_id: str):
        self.server = server
        self.keys = keys
        self.node_id = node_id
        self.key = keys.node(node_id)
        self.started = time.time()

    def write(self, stats: StatsCollector | None, state: str = "running") -> None:
        values = stats.get_stats() if stats is not None else {}
        pipe = self.server.pipeline(transaction=False)
        pipe.zadd(self.keys.nodes, {self.node_id: now_ms()})
        pipe.hset(
            self.key,
            mapping={
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "state": state,
                "started": self.started,
                "last_beat": time.time(),
                "pages": values.get("response_received_count", 0),
                "items": values.get("item_scraped_count", 0),
            },
        )
        pipe.execute()
