"""Forgetting a crawl, and moving the single queue of earlier versions into the
group queues: done once, by a command or a node at open, never per request."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from extensions import connection
from extensions.frontier.redisops import push_start_entries

if TYPE_CHECKING:
    import redis
    from redis.client import Pipeline

    from extensions.frontier.results import Entry
    from extensions.keys import SpiderKeys


class Upkeep:
    """Mixed into the Frontier: what it needs of it, declared."""

    server: redis.Redis
    keys: SpiderKeys

    @property
    def scopes(self) -> list[SpiderKeys]:
        raise NotImplementedError

    def registries(self) -> list[str]:
        raise NotImplementedError

    def enqueue_on(self, pipe: Pipeline, entries: list[Entry]) -> int:
        raise NotImplementedError

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
                keys.held, keys.banned,
                keys.bloom_count, keys.shards_key, keys.revisit, keys.due,
            ]  # fmt: skip
            doomed += [keys.leases(n) for n in nodes] + [keys.node(n) for n in nodes]
            self.server.delete(*doomed)
            patterns = (keys.bloom_prefix, keys.queue(""), keys.data(""), keys.host(""),
                        keys.dupefilter + ":")  # fmt: skip
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
