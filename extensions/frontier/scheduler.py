"""A Scrapy scheduler whose queue is shared by every node through Redis.

Scrapy's scheduler interface over the node's frontier (``node.py``). What it adds
to scrapy-redis's scheduler:

* requests are leased, not popped, and a lease is released only once the engine
  is completely done with its request (``node.py``, ``commit.py``);
* requests are JSON (``serializer.py``), never pickle;
* an idle node asks Redis again after 50 ms, backing off to 1 s, instead of
  every 5 s; and it closes only when the whole cluster's frontier has stayed
  empty for ``MAX_IDLE_TIME_BEFORE_CLOSE`` seconds (``idle.py``);
* crawl ids, the render lane, recrawls and the MongoDB overflow are parts
  named in ``FRONTIER_PARTS`` (``part.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.core.scheduler import BaseScheduler

from extensions import compat, connection, engine
from extensions.cluster.checkpoint import node_id_for
from extensions.frontier.node import NodeFrontier
from extensions.frontier.schedconfig import SchedulerConfig
from extensions.meta import HOST_WATCHED, SEND_SLOT, START_ENTRY

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler


class DistributedScheduler(BaseScheduler):
    def __init__(self, node: NodeFrontier):
        self.node = node

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> DistributedScheduler:
        config = SchedulerConfig.from_settings(crawler.settings)
        server = connection.client_for(crawler, ping=True)
        return cls(NodeFrontier(server, crawler, node_id=node_id_for(crawler), config=config))

    def open(self, spider: Spider) -> None:
        seam = engine.seam_problem()
        if seam:  # the crawl command refuses this earlier, with one line
            raise RuntimeError(seam)
        compat.settle_allowed_domains(spider)  # before the offsite check first reads it
        self.node.open(spider)

    def close(self, reason: str) -> None:
        self.node.close(reason)

    def has_pending_requests(self) -> bool:
        return self.node.has_pending()

    def enqueue_request(self, request: Request) -> bool:
        token = request.meta.pop(START_ENTRY, None)
        # a lease's send slot is its own: a copy queued again gets one at its next lease
        request.meta.pop(SEND_SLOT, None)
        request.meta.pop(HOST_WATCHED, None)
        try:
            return self.node.enqueue(request, from_start_entry=token is not None)
        finally:
            if token is not None:
                # queued, filtered or dead-lettered: its start entry may go
                self.node.start_entries.handled(token)

    def next_request(self) -> Request | None:
        return self.node.next_request()
