"""WARC capture in the node's frontier: what was archived is made durable
before the flush that releases its leases, so a page whose lease is gone is on
disk; a node killed before that leaves its leases to be taken back, and the
page is fetched, and archived, again."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.exceptions import NotConfigured

from extensions.frontier.part import FrontierPart
from extensions.runtime import runtime_of

if TYPE_CHECKING:
    from extensions.frontier.node import NodeFrontier


class WarcPart(FrontierPart):
    def __init__(self, node: NodeFrontier):
        self.runtime = runtime_of(node.crawler)

    @classmethod
    def from_node(cls, node: NodeFrontier) -> WarcPart:
        if not node.crawler.settings.getbool("WARC_ENABLED"):
            raise NotConfigured("WARC_ENABLED is off")
        return cls(node)

    def before_flush(self) -> None:
        if self.runtime.warc is not None:
            self.runtime.warc.sync()
