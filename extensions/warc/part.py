"""WARC capture in the node's frontier: what was archived is made durable
before the flush that releases its leases, so a page whose lease is gone is on
disk; a node killed before that leaves its leases to be taken back, and the
page is fetched, and archived, again. Only then are the new payloads entered
in the crawl's digest index, so no revisit refers to a record that was lost."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import redis
from scrapy.exceptions import NotConfigured

from extensions import connection
from extensions.frontier.part import FrontierPart
from extensions.runtime import runtime_of

if TYPE_CHECKING:
    from extensions.frontier.node import NodeFrontier


class WarcPart(FrontierPart):
    def __init__(self, node: NodeFrontier):
        self.crawler = node.crawler
        self.runtime = runtime_of(node.crawler)

    @classmethod
    def from_node(cls, node: NodeFrontier) -> WarcPart:
        if not node.crawler.settings.getbool("WARC_ENABLED"):
            raise NotConfigured("WARC_ENABLED is off")
        return cls(node)

    def before_flush(self) -> None:
        if self.runtime.warc is None:
            return
        self.runtime.warc.sync()
        publish_payloads(self.crawler)


def publish_payloads(crawler: Any) -> None:
    """Enter the synced records' payloads in the digest index; with Redis away
    they wait for the next flush (their pages stay archived in full)."""
    payloads = runtime_of(crawler).warc_payloads
    if payloads is None:
        return
    try:
        entered = payloads.publish()
    except redis.RedisError as exc:
        crawler.stats.inc_value("warc/digest_errors")
        connection.health_for(crawler).failed(exc)
        return
    if entered:
        crawler.stats.inc_value("warc/payloads_entered", entered)
