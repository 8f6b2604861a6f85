"""The pages whose sites refused the crawl's purpose, counted per host in Redis
with the node's next flush (a page whose node died before its release is
fetched, judged and counted again), and shown by ``scrapy status``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from extensions.connection import text
from extensions.frontier.context import WriteSection
from extensions.frontier.part import FrontierPart, StatusView
from extensions.purpose.judge import Refused, refused_of

if TYPE_CHECKING:
    from redis.client import Pipeline

    from extensions.frontier.context import PartContext
    from extensions.frontier.frontier import Frontier

#: hosts ``scrapy status`` names, those refusing most
HOSTS_SHOWN = 5


class RefusedCounts(WriteSection):
    name = "usage_refused"
    phase = "after"

    def __init__(self, refused: Refused):
        self.refused = refused

    def take(self, parked_groups: list[str]) -> Refused | None:
        if not self.refused:
            return None
        taken = Refused(self.refused.hosts.copy(), self.refused.purposes.copy(),
                        self.refused.items_dropped)  # fmt: skip
        self.refused.hosts.clear()
        self.refused.purposes.clear()
        self.refused.items_dropped = 0
        return taken

    def queue(self, payload: Refused, frontier: Frontier, pipe: Pipeline) -> None:
        keys = frontier.keys
        by_host, totals = keys.named("usage_refused"), keys.named("usage_totals")
        for host, pages in payload.hosts.items():
            pipe.zincrby(by_host, pages, host)
        if payload.hosts:
            pipe.hincrby(totals, "refused", sum(payload.hosts.values()))
        for purpose, pages in payload.purposes.items():
            pipe.hincrby(totals, f"refused:{purpose}", pages)
        if payload.items_dropped:
            pipe.hincrby(totals, "items_dropped", payload.items_dropped)

    def kept(self, payload: Refused) -> None:
        self.refused.hosts.update(payload.hosts)
        self.refused.purposes.update(payload.purposes)
        self.refused.items_dropped += payload.items_dropped


class PurposePart(FrontierPart):
    @classmethod
    def from_context(cls, context: PartContext) -> PurposePart:
        context.write_with_flush(RefusedCounts(refused_of(context.crawler)))
        return cls()

    @classmethod
    def status(cls, view: StatusView) -> dict[str, Any]:
        totals: Any = view.server.hgetall(view.keys.named("usage_totals"))
        if not totals:
            return {}
        counts = {text(k): int(v) for k, v in totals.items()}
        top: Any = view.server.zrevrange(view.keys.named("usage_refused"), 0, HOSTS_SHOWN - 1,
                                         withscores=True)  # fmt: skip
        return {"usage_refused": {
            "pages": counts.get("refused", 0),
            "items_dropped": counts.get("items_dropped", 0),
            "by_purpose": {k.split(":", 1)[1]: n for k, n in counts.items()
                           if k.startswith("refused:")},
            "top_hosts": {text(host): int(pages) for host, pages in top},
        }}  # fmt: skip

    @classmethod
    def status_lines(cls, status: dict[str, Any]) -> list[str]:
        refused = status.get("usage_refused")
        if not refused or not refused["pages"]:
            return []
        purposes = ", ".join(f"{p} {n}" for p, n in sorted(refused["by_purpose"].items()))
        hosts = ", ".join(f"{h} {n}" for h, n in refused["top_hosts"].items())
        return [
            f"refused by their sites: {refused['pages']} pages ({purposes}), "
            f"{refused['items_dropped']} items dropped; most from {hosts}"
        ]
