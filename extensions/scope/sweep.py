"""A changed scope reaches what is queued already: every queued request of the
crawl is judged by it, and those it refuses are removed from Redis at once
(``scrapy scope``), counted in the crawl's ``removed`` and in
``NAME:scope_counts``.

The sweep reads each of the crawl's groups a batch at a time (HSCAN of its
JSON), so it costs the crawl's queued requests once, in the command, and Redis
a bounded call per batch. What it misses (a request leased meanwhile, one
parked for later) is judged when a node leases it, and refused there. With
the MongoDB overflow, what it holds of the crawl is judged too
(``overflow_sweep.py``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from extensions.connection import text
from extensions.crawlid import split_group
from extensions.frontier.manifest import Manifest
from extensions.frontier.redisops import run_named
from extensions.scope.rules import Trail, judge
from extensions.scope.store import SEED, ScopeStore, count_field

if TYPE_CHECKING:
    import redis

    from extensions.keys import SpiderKeys
    from extensions.scope.document import Scope

logger = logging.getLogger(__name__)

BATCH = 1000  # requests judged, and removed at most, per round trip
SCRIPT = "extensions.scope:scope_remove"


@dataclass
class Swept:
    looked: int = 0
    removed: int = 0


def queued_verdict(scopes: dict[str, Scope], crawl: str, raw: bytes) -> str | None:
    """Why a queued request (its JSON) is out of the scope now, or None (a
    JSON that is not a request's is left to the node that leases it)."""
    try:
        data = json.loads(raw)
        url, meta = data["url"], data.get("meta") or {}
        trail = Trail.of(url, meta)
    except (ValueError, KeyError, TypeError, RecursionError):
        return None
    found = [s for s in (scopes.get(crawl), scopes.get(SEED + trail.doc) if trail.doc else None)
             if s is not None]  # fmt: skip
    if not found or not isinstance(url, str):
        return None
    parent = Trail(trail.seed, trail.hops, max(trail.out - 1, 0), trail.doc)
    return judge(found, url, parent, sitemap=data.get("callback") == "_parse_sitemap")[0]


class OverflowGroups(Protocol):
    """What a sweep asks of the requests a crawl holds in MongoDB
    (``overflow_sweep.OverflowSweep``)."""

    def begin(self) -> bool: ...

    def group(self, shard: SpiderKeys, crawl: str, group: str, scopes: Any, swept: Swept,
              reasons: Any) -> None: ...  # fmt: skip


class Sweep:
    def __init__(
        self, server: redis.Redis, keys: SpiderKeys, overflow: OverflowGroups | None = None
    ):
        self.server = server
        self.keys = keys
        self.store = ScopeStore(server, keys)
        self.manifest = Manifest(server, keys)
        #: FRONTIER_OVERFLOW = "mongo": what the crawl holds in MongoDB, judged too
        self.overflow = overflow

    def run(self, crawl: str, progress: Callable[[Swept], Any] = lambda swept: None) -> Swept:
        scopes, _ = self.store.read_all()
        swept = Swept()
        reasons: dict[str, int] = {}
        shards = [self.keys] if self.keys.shards == 1 else self.keys.all_shards()
        overflow = self.overflow if self.overflow is not None and self.overflow.begin() else None
        for shard in shards:
            for group in self._groups(shard, crawl):
                self._sweep_group(shard, group, crawl, scopes, swept, reasons)
                if overflow is not None:
                    overflow.group(shard, crawl, group, scopes, swept, reasons)
                progress(swept)
        if reasons:
            pipe = self.server.pipeline(transaction=False)
            for reason, count in reasons.items():
                pipe.hincrby(self.store.counts_key, count_field(crawl, reason), count)
            pipe.execute()
        return swept

    def _groups(self, shard: SpiderKeys, crawl: str) -> Iterator[str]:
        if crawl:
            for raw in self.server.sscan_iter(shard.crawl_groups(crawl), count=BATCH):
                yield text(raw)
            return
        prefix = shard.queue("")
        for raw in self.server.scan_iter(match=prefix + "*", count=BATCH):
            group = text(raw)[len(prefix) :]
            if split_group(group)[1] == "":
                yield group

    def _sweep_group(
        self, shard: SpiderKeys, group: str, crawl: str, scopes: dict[str, Scope],
        swept: Swept, reasons: dict[str, int],
    ) -> None:  # fmt: skip
        refused: dict[bytes, str] = {}
        for ident, raw in self.server.hscan_iter(shard.data(group), count=BATCH):
            swept.looked += 1
            reason = queued_verdict(scopes, crawl, raw)
            if reason is not None:
                refused[ident] = reason
            if len(refused) >= BATCH:
                self._remove(shard, group, refused, swept, reasons)
                refused = {}
        if refused:
            self._remove(shard, group, refused, swept, reasons)

    def _remove(self, shard: SpiderKeys, group: str, refused: dict[bytes, str], swept: Swept,
                reasons: dict[str, int]) -> None:  # fmt: skip
        gone = run_named(
            self.manifest.script(SCRIPT),
            {"frontier": shard.frontier},
            {"queue_prefix": shard.queue(""), "data_prefix": shard.data(""), "group": group},
            items=list(refused),
        )  # a request leased since it was read stays: its node judges it
        swept.removed += len(gone)
        for ident in gone:
            reason = refused[ident]
            reasons[reason] = reasons.get(reason, 0) + 1
