"""A changed scope reaches what the MongoDB overflow holds (``FRONTIER_OVERFLOW =
"mongo"``): each of the crawl's groups with requests out of Redis is read back
from MongoDB, judged, and what the scope refuses is dropped through the
overflow's own refill (``refill.lua``), under a refill claim of the sweep's, as
a node's refill takes a group: the group's counts and the crawl's queued
requests go down in the same script, and the documents become tombstones.

A node's refill of the group that ran meanwhile loses its claim and does
nothing (the group is refilled at its next turn); a sweep cut short leaves its
refill marks, which the nodes settle as they settle a dead node's.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any

from extensions import clock
from extensions.connection import text
from extensions.frontier.manifest import Manifest
from extensions.frontier.overflow.turn import REFILL
from extensions.frontier.redisops import run_named
from extensions.scope.sweep import BATCH, Swept, queued_verdict

if TYPE_CHECKING:
    import redis

    from extensions.frontier.overflow.store import MongoOverflow
    from extensions.keys import SpiderKeys
    from extensions.scope.document import Scope

logger = logging.getLogger(__name__)

#: how long the sweep's claim on a group lasts (a node's lasts as long)
CLAIM_MS = 15_000


class OverflowSweep:
    def __init__(self, server: redis.Redis, keys: SpiderKeys, store: MongoOverflow):
        self.server = server
        self.keys = keys
        self.store = store
        self.manifest = Manifest(server, keys)
        self.node = f"scope-sweep-{os.getpid()}"

    def begin(self) -> bool:
        """Whether the crawl ever spilled (its epoch names its documents)."""
        epoch = self.server.hget(self.keys.shard(0).frontier, "overflow_epoch")
        if epoch is not None:
            self.store.epoch = text(epoch)
        return epoch is not None

    def group(self, shard: SpiderKeys, crawl: str, group: str, scopes: dict[str, Scope],
              swept: Swept, reasons: dict[str, int]) -> None:  # fmt: skip
        if self.server.exists(shard.named("overflow", group=group)):
            self._group(shard, crawl, group, scopes, swept, reasons)

    def _group(self, shard: SpiderKeys, crawl: str, group: str, scopes: dict[str, Scope],
               swept: Swept, reasons: dict[str, int]) -> None:  # fmt: skip
        query: dict[str, Any] = {"e": self.store.epoch, "g": group, "t": None}
        last: Any = None
        while True:
            page = dict(query, _id={"$gt": last}) if last is not None else query
            docs = list(self.store.collection.find(page).sort("_id", 1).limit(BATCH))
            if not docs:
                return
            last = docs[-1]["_id"]
            refused: list[tuple[str, str, str]] = []  # id, life, reason
            prefix = f"{self.store.epoch} {group} "
            for doc in docs:
                swept.looked += 1
                doc_id, request = doc.get("_id"), doc.get("r")
                parts = doc_id[len(prefix) :].split(" ") if isinstance(doc_id, str) else []
                if len(parts) != 2 or not isinstance(request, str):
                    continue  # not a request: the refill that meets it dead-letters it
                reason = queued_verdict(scopes, crawl, request.encode())
                if reason is not None:
                    refused.append((parts[0], parts[1], reason))
            if refused and not self._drop(shard, group, refused, swept, reasons):
                return  # a node took the group meanwhile: its leases judge the rest

    def _drop(self, shard: SpiderKeys, group: str, refused: list[tuple[str, str, str]],
              swept: Swept, reasons: dict[str, int]) -> bool:  # fmt: skip
        claim = str(clock.now_ms() + CLAIM_MS)
        refill = shard.named("refill")
        self.server.zadd(refill, {group: claim})
        items: list[str] = []
        for ident, life, _ in refused:
            items.extend((ident, life, "", ""))  # no order: dropped, not queued
        settled = run_named(
            self.manifest.script(REFILL),
            {"ready": shard.ready, "waiting": shard.waiting, "frontier": shard.frontier,
             "refilled": shard.named("refilled"), "refill": refill},
            {"queue_prefix": shard.queue(""), "data_prefix": shard.data(""), "node": self.node,
             "group": group, "now": clock.now_ms(), "retry_ms": 0, "claim": claim},
            items=items,
        )  # fmt: skip
        if settled is None:
            return False
        texts = [text(part) for part in settled]
        lives = list(zip(texts[::2], texts[1::2], strict=True))
        self.store.mark_taken(group, lives)
        if lives:
            marks = (f"{group}\n{ident}\n{life}" for ident, life in lives)
            self.server.hdel(shard.named("refilled"), *marks)
        dropped = {(ident, life) for ident, life in lives}
        for ident, life, reason in refused:
            if (ident, life) in dropped:
                reasons[reason] = reasons.get(reason, 0) + 1
        swept.removed += len(dropped)
        crawl_key = shard.crawl(group.rpartition("#")[2]) if "#" in group else None
        if crawl_key and dropped:
            self.server.hincrby(crawl_key, "removed", len(dropped))
        return True
