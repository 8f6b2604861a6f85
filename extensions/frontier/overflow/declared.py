"""The MongoDB overflow, declared (``extensions/capability.py``): its settings
with their checks, its keys, its frontier part; what each does: the package's
modules (``spilling.py``, ``store.py``, ``part.py``, ``_overflow.lua``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from extensions.capability import Capability, Key, Setting
from extensions.settingchecks import choice, number

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings


def _overflow(settings: BaseSettings, name: str) -> str | None:
    problem = choice(None, "mongo")(settings, name)
    if problem is None and settings.get(name) == "mongo" and not settings.get("MONGO_URI"):
        return "needs MONGO_URI (where the overflow goes)"
    return problem


_SPILLS = "the scripts that queue (_overflow.lua: a group over its bound)"

CAPABILITY = Capability(
    name="overflow",
    about="the MongoDB overflow (extensions/frontier/overflow/)",
    settings={
        "FRONTIER_OVERFLOW": Setting(
            None,
            'FRONTIER_OVERFLOW = "mongo" (needs MONGO_URI): each host group keeps at most '
            "FRONTIER_HOST_QUEUE_MAX requests in Redis, the rest in MongoDB "
            "(NAME_frontier), back in order as the group drains; None keeps the whole "
            "frontier in Redis",
            _overflow,
        ),
        "FRONTIER_HOST_QUEUE_MAX": Setting(
            200, "a group's requests in Redis at most (its head)", number(int, 1)
        ),
        "FRONTIER_OVERFLOW_BATCH": Setting(
            1000,
            "requests one spill or one group's refill moves at most",
            number(int, 1, 10_000),
        ),
        "FRONTIER_OVERFLOW_INTERVAL": Setting(
            0.5,
            "seconds between a node's turns at spilling and refilling",
            number(float, 0, above=True),
        ),
        "FRONTIER_OVERFLOW_BACKLOG": Setting(
            200_000,
            "spill records Redis holds while MongoDB cannot take them; past that, nodes "
            "lease no more (the crawl slows rather than drops)",
            number(int, 1),
        ),
        "FRONTIER_START_URLS_MAX": Setting(
            100_000,
            "with FRONTIER_OVERFLOW: start entries scrapy seed keeps in Redis at most, "
            "pushing more as nodes take them",
            number(int, 1),
        ),
    },
    keys={
        "spill": Key(
            "%(name)s:spill",
            "list",
            "FRONTIER_OVERFLOW: requests on their way to MongoDB (``NAME_frontier``): "
            "GROUP, ID, LIFE (the request's trip out: 'lives' in NAME:frontier counts "
            "them), ORDER and JSON, one per line",
            f"{_SPILLS}; overflow_take.lua takes",
            sharded=True,
        ),
        "spilling": Key(
            "%(name)s:spilling:%(node)s",
            "list",
            "the batch NODE is writing to MongoDB (written again by any node if NODE dies)",
            "overflow_take.lua, spill_done.lua",
            sharded=True,
        ),
        "spillers": Key(
            "%(name)s:spillers",
            "zset",
            "nodes with such a batch -> when they took it (ms)",
            "overflow_take.lua, spill_done.lua",
            sharded=True,
        ),
        "overflow": Key(
            "%(name)s:overflow:%(group)s",
            "hash",
            "that group's requests out of Redis: n (in MongoDB or on their way), floor "
            "(none has a better order), transit (on their way), tmin (the best of those)",
            f"{_SPILLS}, spill_done.lua, refill.lua",
            sharded=True,
        ),
        "refill": Key(
            "%(name)s:refill",
            "zset",
            "groups due for a refill from MongoDB -> when one may be claimed (ms; a claim "
            "pushes it ahead)",
            "_overflow.lua (in lease.lua, crawl_drain.lua), spill_done.lua, "
            "overflow_take.lua (claims), refill.lua",
            sharded=True,
        ),
        "refilled": Key(
            "%(name)s:refilled",
            "hash",
            "requests back from MongoDB whose documents are not yet marked taken: GROUP, "
            "ID and LIFE, one per line -> node",
            "refill.lua; spilling.py (once the documents are marked taken)",
            sharded=True,
        ),
    },
    frontier_parts={"extensions.frontier.overflow.part.OverflowPart": 400},
)
