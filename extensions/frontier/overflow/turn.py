"""What one turn of the overflow is given and gives (``spilling.py``): its
limits, read from the settings; its scripts and the keys its take names; what
it did."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from extensions import defaults

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

    from extensions.keys import SpiderKeys

# the overflow's own scripts (with its piece, _overflow.lua)
TAKE, SPILLED, REFILL = (
    f"{__package__}:{name}" for name in ("overflow_take", "spill_done", "refill")
)


def take_keys(keys: SpiderKeys, node: str) -> dict[str, str]:
    """The keys of a turn's take (overflow_take.lua) in one shard, for ``node``."""
    return {"spill": keys.named("spill"), "journal": keys.named("spilling", node=node),
            "spillers": keys.named("spillers"), "refill": keys.named("refill"),
            "frontier": keys.frontier}  # fmt: skip


@dataclass
class Turn:
    """What one turn did, counted in the stats by the reactor."""

    spilled: int = 0
    refilled: int = 0
    recovered: int = 0
    malformed: list[dict[str, Any]] = field(default_factory=list)
    #: spill records waiting in Redis, all shards together
    backlog: int = 0


@dataclass(frozen=True)
class OverflowLimits:
    """The overflow's settings: FRONTIER_HOST_QUEUE_MAX, FRONTIER_OVERFLOW_BATCH,
    FRONTIER_OVERFLOW_INTERVAL and FRONTIER_OVERFLOW_BACKLOG, and NODE_TIMEOUT
    (after which a dead node's half-done steps are finished by another) with
    NODE_HEARTBEAT_INTERVAL (how soon a node speaks again after a silence)."""

    queue_max: int
    batch: int
    interval: float
    backlog_max: int
    node_timeout: float
    heartbeat_interval: float = defaults.NODE_HEARTBEAT_INTERVAL

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> OverflowLimits:
        return cls(
            queue_max=settings.getint("FRONTIER_HOST_QUEUE_MAX"),
            batch=settings.getint("FRONTIER_OVERFLOW_BATCH"),
            interval=settings.getfloat("FRONTIER_OVERFLOW_INTERVAL"),
            backlog_max=settings.getint("FRONTIER_OVERFLOW_BACKLOG"),
            node_timeout=settings.getfloat("NODE_TIMEOUT"),
            heartbeat_interval=settings.getfloat("NODE_HEARTBEAT_INTERVAL"),
        )
