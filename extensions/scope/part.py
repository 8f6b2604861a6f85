"""The scope's share of a node's frontier: a seed's own scope taken in at
admission, every leased request judged again before the engine gets it (so a
change reaches queued work), the counts written, and what ``scrapy status``
shows of it."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from extensions.connection import text
from extensions.frontier.crawls.state import Crawls
from extensions.frontier.part import FrontierPart, StatusView
from extensions.runtime import set_state
from extensions.scope.rules import REASONS
from extensions.scope.state import ScopeState
from extensions.scope.store import ScopeStore

if TYPE_CHECKING:
    from extensions.frontier.context import PartContext

#: the crawler's ScopeState (the spider and downloader middlewares judge with it)
STATE = "scope"


class ScopePart(FrontierPart):
    figures = {"scope_refused": "refused by scope"}

    def __init__(self, state: ScopeState):
        self.state = state

    @classmethod
    def from_context(cls, context: PartContext) -> ScopePart:
        crawls = Crawls(context.server, context.keys)

        def stop_crawl(crawl: str, why: str) -> None:
            crawls.stop(crawl, calls=1)  # the rest by the heartbeats (crawl_ends)
            context.stats.inc_value("scope/crawls_stopped")

        state = ScopeState(
            ScopeStore(context.server, context.keys),
            context.stats,
            context.health,
            refresh=context.settings.getfloat("SCOPE_REFRESH"),
            stop_crawl=stop_crawl,
        )
        set_state(context.crawler, STATE, state)
        context.check_start_entries(state.seed_problem)
        context.decide_admitted(state.mark)
        context.check_leased(state.leased)
        return cls(state)

    def open(self, spider: Any) -> None:
        self.state.look()

    def heartbeat(self) -> None:
        self.state.look()

    def close(self) -> None:
        self.state.looked = float("-inf")
        self.state.look()  # what it counted goes out

    @classmethod
    def status(cls, view: StatusView) -> dict[str, Any]:
        """The crawls' scopes and what the nodes refused by them (``scrapy status``)."""
        store = ScopeStore(view.server, view.keys)
        scopes, _ = store.read_all()
        refused: dict[str, int] = {}
        raw: Any = view.server.hgetall(store.counts_key)
        for field, value in raw.items():
            _, _, reason = text(field).rpartition("|")
            if reason in REASONS:
                refused[reason] = refused.get(reason, 0) + int(value)
        crawls = {name: s.as_dict() for name, s in scopes.items() if not name.startswith("seed:")}
        return {"scopes": crawls, "scope_refused": refused}

    @classmethod
    def status_lines(cls, status: dict[str, Any]) -> list[str]:
        lines = []
        for crawl, scope in sorted(status.get("scopes", {}).items()):
            name = f"crawl {crawl}" if crawl else "the crawl without an id"
            lines.append(f"scope of {name}: {_short(scope)}")
        refused = status.get("scope_refused") or {}
        if refused:
            counts = ", ".join(f"scope/{r} {refused[r]}" for r in REASONS if r in refused)
            lines.append(f"refused by scope: {counts}")
        return lines


def _short(scope: dict[str, Any]) -> str:
    return ", ".join(f"{k}={json.dumps(v)}" for k, v in scope.items()) or "(empty)"
