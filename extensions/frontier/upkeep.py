"""Forgetting a crawl, and bringing a crawl written by earlier versions to the
layout every script reads: done once, by a node at open (``upgrade``), never on
the path of a request."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from extensions import capability, connection
from extensions.compat import PICKLE_PREFIX
from extensions.frontier.groups import group_for
from extensions.frontier.redisops import load_script, push_start_entries, run_named

if TYPE_CHECKING:
    import redis
    from redis.client import Pipeline

    from extensions.frontier.results import Entry
    from extensions.keys import SpiderKeys


logger = logging.getLogger(__name__)

#: the layout this version reads (ids in the queues and leases, the dupefilter's
#: levels), marked in NAME:frontier once a crawl is brought to it
FORMAT = b"2"
UPGRADE_BATCH = 500


class FrontierOps(Protocol):
    """What upkeep needs of the frontier (``frontier.Frontier`` has it)."""

    server: redis.Redis
    keys: SpiderKeys

    @property
    def scopes(self) -> list[SpiderKeys]: ...

    def registries(self) -> list[str]: ...

    def enqueue_on(self, pipe: Pipeline, entries: list[Entry]) -> int: ...


class Upkeep:
    def __init__(self, frontier: FrontierOps):
        self.frontier = frontier
        self.server = frontier.server
        self.keys = frontier.keys
        self.enqueue_on = frontier.enqueue_on
        self.registries = frontier.registries

    @property
    def scopes(self) -> list[SpiderKeys]:
        return self.frontier.scopes

    def clear(self) -> None:
        """Forget the crawl: queue, seen fingerprints, every node's leases and
        progress. Start URLs waiting to be read (those a node had taken go back
        to the start list) and the dead letters stay."""
        nodes = sorted(
            {
                connection.text(n)
                for key in self.registries()
                for n in self.server.zrange(key, 0, -1)
            }
        )
        for node in nodes:
            entries = self.server.lrange(self.keys.start_leases(node), 0, -1)
            if entries:
                push_start_entries(self.server, self.keys, entries, back=True)
                self.server.delete(self.keys.start_leases(node))
        for keys in self.scopes:
            doomed = [
                keys.requests, keys.dupefilter, keys.delayed, keys.nodes, keys.checkpoint,
                keys.fingerprinter, keys.ready, keys.waiting, keys.frontier, keys.crawl_delay,
                keys.held, keys.banned, keys.holds,
                keys.bloom_count, keys.shards_key, keys.crawls, keys.turns, keys.crawl_ends,
                keys.ready + ":render", keys.turns + ":render", keys.lines, keys.params_hosts,
                keys.params_learned, keys.payment_required,
            ]  # fmt: skip
            doomed += [keys.leases(n) for n in nodes] + [keys.node(n) for n in nodes]
            # the crawl state a capability declares (recrawls' revisit and due keys, the
            # render nodes and the patterns RENDER_AUTO learned)
            doomed += [keys.named(name) for name, key in capability.keys().items()
                       if key.crawl_state]  # fmt: skip
            self.server.delete(*doomed)
            patterns = (keys.bloom_prefix, keys.queue(""), keys.data(""), keys.host(""),
                        keys.dupefilter + ":", keys.crawl(""), keys.domain(""),
                        keys.address(""), keys.digests_prefix, keys.near_prefix,
                        keys.params(""))  # fmt: skip
            for pattern in patterns:
                batch = []
                for key in self.server.scan_iter(
                    match=connection.glob_escape(pattern) + "*", count=1000
                ):
                    batch.append(key)
                    if len(batch) >= 1000:
                        self.server.delete(*batch)
                        batch = []
                if batch:
                    self.server.delete(*batch)

    def convert_legacy_queue(self, group_of: Callable[[dict[str, Any]], str]) -> int:
        """Move the single queue of earlier versions (``NAME:requests``, JSON)
        into the group queues, in batches; returns how many moved."""
        moved = 0
        while True:
            items: Any = self.server.zrange(self.keys.requests, 0, 499, withscores=True)
            if not items:
                return moved
            entries: list[Entry] = []
            for data, score in items:
                try:
                    obj = json.loads(data)
                    group = group_of(obj) if isinstance(obj, dict) else ""
                except (ValueError, RecursionError):
                    group = ""  # read, and dead-lettered, by the node that leases it
                entries.append(("", group, -score, data))
            pipe = self.server.pipeline(transaction=True)
            self.enqueue_on(pipe, entries)
            pipe.zrem(self.keys.requests, *(data for data, _ in items))
            pipe.execute()
            moved += len(items)

    def upgrade_crawl(self, queue_by: str) -> None:
        """At a node's open: ``upgrade``, saying what it did; scrapy-redis's pickled
        queue is refused (``scrapy migrate`` converts it)."""
        if self.server.type(self.keys.requests) == b"zset":
            first: Any = self.server.zrange(self.keys.requests, 0, 0)
            if first and first[0].startswith(PICKLE_PREFIX):
                raise RuntimeError(
                    f"{self.keys.requests} holds scrapy-redis's pickled queue: "
                    f"run `scrapy migrate {self.keys.name}` first"
                )

        def group_of(stored: dict[str, Any]) -> str:
            meta = stored.get("meta")
            slot = meta.get("download_slot") if isinstance(meta, dict) else None
            return group_for(str(stored.get("url", "")), slot, queue_by)

        done = self.upgrade(group_of)
        if any(done.values()):
            logger.info(
                "brought the crawl to this version's layout: %d requests of the single queue "
                "moved into per-host queues, %d whole-JSON queue entries made ids, %d "
                "fingerprints moved into the dupefilter's levels",
                done["requests"], done["inline"], done["fingerprints"],
            )  # fmt: skip

    def upgrade(self, group_of: Callable[[dict[str, Any]], str]) -> dict[str, int]:
        """Bring a crawl written by earlier versions to this version's layout: the
        single queue moved into the group queues, whole-JSON queue and lease members
        made ids, the dupefilter's old buckets moved into its levels. Once per
        crawl: a crawl marked upgraded (NAME:frontier 'format') costs one read."""
        done = {"requests": self.convert_legacy_queue(group_of), "inline": 0, "fingerprints": 0}
        scopes = self.scopes
        pipe = self.server.pipeline(transaction=False)
        for keys in scopes:
            pipe.hget(keys.frontier, "format")
            pipe.exists(keys.frontier, keys.dupefilter, keys.ready, keys.nodes)
        marks = pipe.execute()
        for index, keys in enumerate(scopes):
            if marks[2 * index] == FORMAT:
                continue
            if marks[2 * index + 1]:  # state of an earlier version's: a fresh crawl has none
                done["inline"] += self._upgrade_inline(keys)
                done["fingerprints"] += self._upgrade_dupefilter(keys)
            self.server.hset(keys.frontier, "format", FORMAT)
        return done

    def _upgrade_inline(self, keys: SpiderKeys) -> int:
        script = self.server.register_script(load_script("upgrade_inline"))
        upgraded = 0
        for prefix, leases in ((keys.queue(""), False), (keys.leases_prefix(), True)):
            match = connection.glob_escape(prefix) + "*"
            for key in list(self.server.scan_iter(match=match, count=1000)):
                name = connection.text(key)
                group = "" if leases else name[len(prefix) :]
                old = [
                    member
                    for member, _ in self.server.zscan_iter(key, count=1000)
                    if (member.partition(b"\n")[2] or member if leases else member)[:1] == b"{"
                ]
                for start in range(0, len(old), UPGRADE_BATCH):
                    batch = old[start : start + UPGRADE_BATCH]
                    args = {"data_prefix": keys.data(""), "leases": "1" if leases else "0",
                            "group": group}  # fmt: skip
                    script_keys = {"members": name, "frontier": keys.frontier}
                    upgraded += int(run_named(script, script_keys, args, items=batch))
        return upgraded

    def _upgrade_dupefilter(self, keys: SpiderKeys) -> int:
        script = self.server.register_script(load_script("upgrade_dupefilter"))
        buckets = [f for f, _ in self.server.hscan_iter(keys.dupefilter, count=1000) if len(f) == 2]
        moved = 0
        for start in range(0, len(buckets), UPGRADE_BATCH):
            batch = buckets[start : start + UPGRADE_BATCH]
            args = {"level_prefix": keys.dupefilter + ":", "moved": moved}
            moved = int(run_named(script, {"dupefilter": keys.dupefilter}, args, items=batch))
        return moved
