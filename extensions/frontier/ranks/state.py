"""Host importance from the crawl's own link graph.

A host's rank is how many registered domains link to it: each node reports the
links of the pages it fetches that leave the page's registered domain
(``spidermiddlewares/linkgraph.py``), and Redis keeps, per queue group, a
HyperLogLog of the domains that link to it (``NAME:inlinks:GROUP``, a few dozen
bytes for a host few link to, 12 KB at most) and the count in ``NAME:hostrank``
(``scripts/link_graph.lua``). Counting domains, not pages or hosts, is what
IRLbot's budgets and Common Crawl's host ranks rest on: a site linking to itself
does not raise it, and a link farm of ten thousand hosts under one registered
domain counts once. ``scrapy hostrank NAME import FILE`` seeds or replaces ranks
(a Tranco or Common Crawl export); a learned count only ever raises one.

The rank decides a host's page budget (``HOST_BUDGET_BY_RANK``) and, with
``FRONTIER_ORDER = "importance"``, its share of the lease turns.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from extensions.frontier.manifest import Manifest
from extensions.frontier.redisops import execute, fields, run_named
from extensions.keys import SpiderKeys

if TYPE_CHECKING:
    import redis
    from scrapy.settings import BaseSettings

IMPORT_BATCH = 1000  # ranks one ZADD writes


@dataclass(frozen=True)
class RankBudget:
    """HOST_BUDGET_BY_RANK: a host may be given ``floor + per_rank * rank``
    requests in a crawl, at most ``ceiling``."""

    floor: int
    per_rank: float
    ceiling: int

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> RankBudget | None:
        value = settings.getdict("HOST_BUDGET_BY_RANK")
        if not value:
            return None
        return cls(int(value["floor"]), float(value["per_rank"]), int(value["ceiling"]))

    def for_rank(self, rank: float) -> int:
        rank = rank if math.isfinite(rank) and rank > 0 else 0.0
        return int(min(self.ceiling, self.floor + self.per_rank * rank))

    def args(self, keys: SpiderKeys) -> dict[str, Any]:
        """What enqueue*.lua reads the budget from (``scripts/_ranks.lua``): the
        function, and where the ranks are."""
        return {"budget": 0, "rank_key": keys.named("hostrank"), "rank_floor": self.floor,
                "rank_per": self.per_rank, "rank_ceiling": self.ceiling}  # fmt: skip


class HostRanks:
    """The ranks of one crawl's hosts, over its shards."""

    def __init__(self, server: redis.Redis, keys: SpiderKeys):
        self.server = server
        self.keys = keys
        self.shards = keys.all_shards()
        self.manifest = Manifest(server, keys)  # a raised rank may reorder a ready set

    def _by_shard(self, groups: Iterable[str]) -> dict[int, list[str]]:
        parts: dict[int, list[str]] = {}
        for group in groups:
            parts.setdefault(self.keys.shard_of(group), []).append(group)
        return parts

    def add_links(self, links: Iterable[tuple[str, str, str]]) -> tuple[int, int]:
        """Add (group, queue group, linking registered domain) links: the queue
        group is the one a request for the host joined (its crawl, its lane), which
        moves ahead when the rank rises. (Ranks that rose, keys of ours another
        writer had left as something else, replaced). Raises redis.RedisError."""
        items: dict[int, list[str]] = {}
        for link in links:
            items.setdefault(self.keys.shard_of(link[0]), []).extend(link)
        if not items:
            return 0, 0
        pipe = self.server.pipeline(transaction=False)
        for shard, part in items.items():
            keys = self.shards[shard]
            script_keys = {"hostrank": keys.named("hostrank"), "ready": keys.ready,
                           "frontier": keys.frontier}  # fmt: skip
            args = {"inlinks_prefix": keys.named("inlinks", group=""), "data_prefix": keys.data("")}
            run_named(
                self.manifest.script(f"{__package__}:link_graph"), script_keys, args, pipe, part
            )
        answers = [fields(result) for result in execute(pipe)]
        return sum(int(a["raised"]) for a in answers), sum(int(a["bad"]) for a in answers)

    def set_ranks(self, ranks: Mapping[str, float]) -> int:
        """Give each group its rank, whatever it had (an import); how many."""
        pipe = self.server.pipeline(transaction=False)
        for shard, groups in self._by_shard(ranks).items():
            key = self.shards[shard].named("hostrank")
            for start in range(0, len(groups), IMPORT_BATCH):
                pipe.zadd(key, {g: ranks[g] for g in groups[start : start + IMPORT_BATCH]})
        execute(pipe)
        return len(ranks)

    def ranks(self, groups: Iterable[str]) -> dict[str, float]:
        """The rank of each group that has one."""
        found: dict[str, float] = {}
        for shard, part in self._by_shard(groups).items():
            scores = self.server.zmscore(self.shards[shard].named("hostrank"), part)
            found.update({g: float(s) for g, s in zip(part, scores, strict=True) if s is not None})
        return found

    def top(self, count: int) -> list[tuple[str, float]]:
        """The ``count`` best-ranked groups, best first."""
        pipe = self.server.pipeline(transaction=False)
        for keys in self.shards:
            pipe.zrange(keys.named("hostrank"), 0, count - 1, desc=True, withscores=True)
        rows = ((_text(g), float(s)) for part in pipe.execute() for g, s in part)
        return heapq.nlargest(count, rows, key=lambda row: (row[1], row[0]))

    def top_rows(self, count: int, budget: int | RankBudget) -> list[dict[str, Any]]:
        """The best-ranked groups, best first, with what they were given and
        their page budget (None: no limit)."""
        top = self.top(count)
        pipe = self.server.pipeline(transaction=False)
        for group, _ in top:
            pipe.hmget(self.shards[self.keys.shard_of(group)].host(group), "leased", "accepted")
        rows = []
        for (group, rank), (leased, accepted) in zip(top, pipe.execute(), strict=True):
            limit = budget if isinstance(budget, int) else budget.for_rank(rank)
            rows.append({"host": group, "rank": rank, "leased": _count(leased),
                         "accepted": _count(accepted), "budget": limit or None})  # fmt: skip
        return rows

    def graph_bytes(self, group: str) -> int:
        """What ``group``'s sketch takes in Redis (MEMORY USAGE), for the bench."""
        keys = self.shards[self.keys.shard_of(group)]
        return int(self.server.memory_usage(keys.named("inlinks", group=group)) or 0)


def _count(value: Any) -> int:
    try:
        return max(int(value or 0), 0)
    except (TypeError, ValueError):
        return 0  # not a count a script wrote


def _text(value: Any) -> str:
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else str(value)
