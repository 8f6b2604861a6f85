"""Host ranks in a node's frontier. Each node says at open which order the crawl
takes (``FRONTIER_ORDER``, in each shard's ``NAME:frontier`` 'order'): with
"importance", the scripts that make a group ready place it by its head's order
less ``RANK_STEPS`` priority steps per doubling of its rank
(``scripts/_ranks.lua``), so hosts more domains link to take the lease turns
first, each within its own politeness."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from extensions import connection
from extensions.frontier.part import FrontierPart, StatusView
from extensions.frontier.redisops import execute

if TYPE_CHECKING:
    from scrapy import Spider

    from extensions.frontier.context import PartContext


class RanksPart(FrontierPart):
    figures = {"ranked_hosts": "ranked hosts"}
    lua_pieces = (f"{__package__}:_ranks",)

    def __init__(self, context: PartContext, order: str):
        self.context = context
        self.order = order

    def pieces(self) -> tuple[str, ...]:
        # a crawl that neither orders by importance nor budgets by rank: its
        # scripts read no ranks (its link graph still learns them: link_graph.lua)
        settings = self.context.settings
        if self.order == "importance" or settings.getdict("HOST_BUDGET_BY_RANK"):
            return self.lua_pieces
        return ()

    @classmethod
    def from_context(cls, context: PartContext) -> RanksPart:
        # on in every crawl: one that no longer asks for importance says so too
        return cls(context, context.settings.get("FRONTIER_ORDER"))

    def open(self, spider: Spider) -> None:
        pipe = self.context.server.pipeline(transaction=False)
        for keys in self.context.frontier.shards:
            pipe.hset(keys.frontier, "order", self.order)
        execute(pipe)

    @classmethod
    def status(cls, view: StatusView) -> dict[str, Any]:
        pipe = view.server.pipeline(transaction=False)
        shards = view.keys.all_shards()
        for keys in shards:
            pipe.zcard(keys.named("hostrank"))
        pipe.hget(shards[0].frontier, "order")
        *counts, order = pipe.execute()
        return {"ranked_hosts": sum(counts), "order": connection.text(order or "discovery")}

    @classmethod
    def status_lines(cls, status: dict[str, Any]) -> list[str]:
        ranked, order = status.get("ranked_hosts", 0), status.get("order", "discovery")
        if not ranked and order != "importance":
            return []
        return [f"host ranks:   {ranked} hosts ranked   order: {order}"]
