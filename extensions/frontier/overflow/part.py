"""The MongoDB overflow in a node's frontier: the node's share of moving requests
between the host queues and MongoDB, and no leasing while MongoDB cannot take
what waits to spill (the crawl slows instead of filling Redis)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import NotConfigured

from extensions.frontier.overflow.spilling import Overflow
from extensions.frontier.overflow.store import MongoOverflow
from extensions.frontier.overflow.turn import OverflowLimits
from extensions.frontier.part import FrontierPart, StatusView

if TYPE_CHECKING:
    from scrapy import Spider

    from extensions.frontier.context import PartContext

logger = logging.getLogger(__name__)


class OverflowPart(FrontierPart):
    figures = {"spilled": "in MongoDB"}
    lua_pieces = (f"{__package__}:_overflow",)

    def __init__(self, overflow: Overflow):
        self.overflow = overflow

    @classmethod
    def from_context(cls, context: PartContext) -> OverflowPart:
        """Started with FRONTIER_OVERFLOW = "mongo"; else left out, after a warning
        if the crawl spills all the same (another node set it)."""
        settings, frontier = context.settings, context.frontier
        if settings.get("FRONTIER_OVERFLOW") != "mongo":
            bound = context.server.hget(frontier.keys.frontier, "host_queue_max")
            if bound and int(bound) > 0:
                logger.warning(
                    "this crawl's host groups keep at most %s requests in Redis and spill "
                    'the rest to MongoDB, but this node has no FRONTIER_OVERFLOW = "mongo": '
                    "it queues and leases, and leaves the moving to the nodes that have it",
                    int(bound),
                )
            raise NotConfigured
        overflow = Overflow(
            frontier,
            MongoOverflow.from_settings(settings, context.spider.name),
            OverflowLimits.from_settings(settings),
            stats=context.stats,
            dead_letter=context.dead_letter,
            resumed=context.wake,
        )
        return cls(overflow)

    @classmethod
    def status(cls, view: StatusView) -> dict[str, Any]:
        # of the queued, those in MongoDB or on their way there
        return {"spilled": view.sizes.spilled}

    @classmethod
    def node_status(cls, record: dict[str, str]) -> dict[str, Any]:
        # leasing nothing while MongoDB cannot take spills
        return {"spill_held": record.get("spill_held") == "1"}

    @classmethod
    def node_notes(cls, row: dict[str, Any]) -> list[str]:
        return ["held back: MongoDB takes no spills"] if row.get("spill_held") else []

    def open(self, spider: Spider) -> None:
        self.overflow.open()

    def lease_room(self, room: int) -> int:
        # MongoDB cannot take spills: the crawl waits (its turn wakes the node)
        return 0 if self.overflow.holding else room

    def checkpoint(self) -> dict[str, Any]:
        return {"spill_held": int(self.overflow.holding)}

    def close(self) -> None:
        self.overflow.close()
