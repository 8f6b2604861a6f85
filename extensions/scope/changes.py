"""A change to a crawl's scope, as ``scrapy scope`` and the console make it:
checked whole (nothing changes if any part does not hold), stored for the
cluster, and swept through what is queued (``sweep.py``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from extensions.crawlid import crawl_id_problem
from extensions.scope.document import EMPTY, Scope, ScopeError, parse, parse_value
from extensions.scope.store import ScopeStore
from extensions.scope.sweep import Sweep, Swept

if TYPE_CHECKING:
    from collections.abc import Callable

    import redis
    from scrapy.settings import BaseSettings

    from extensions.keys import SpiderKeys
    from extensions.scope.overflow_sweep import OverflowSweep


@dataclass(frozen=True)
class Change:
    crawl: str = ""
    include: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    #: FIELD=VALUE, each as typed (``--set``)
    sets: list[str] = field(default_factory=list)
    #: the whole document, in place of the crawl's (the console's seed form)
    document: Any = None
    clear: bool = False

    @classmethod
    def from_json(cls, body: Any) -> Change:
        """The console's change: {"crawl", "include": [...], "exclude": [...],
        "set": {"field": value}, "clear": true}; ScopeError naming what is wrong."""
        if not isinstance(body, dict):
            raise ScopeError("scope: the body must be a JSON object")
        crawl = body.get("crawl") or ""
        problem = crawl_id_problem(crawl) if crawl else None
        if problem or not isinstance(crawl, str):
            raise ScopeError(f"crawl: {problem or 'must be a crawl id'}")
        patterns = {}
        for name in ("include", "exclude"):
            value = body.get(name) or []
            value = [value] if isinstance(value, str) else value
            if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
                raise ScopeError(f"{name}: must be a list of regular expressions")
            patterns[name] = [p for p in value if p.strip()]
        sets = body.get("set") or {}
        if not isinstance(sets, dict):
            raise ScopeError('set: must be an object, {"field": value}')
        typed = [f"{k}={_typed(v)}" for k, v in sets.items()]
        return cls(crawl, patterns["include"], patterns["exclude"], typed,
                   clear=body.get("clear") is True)  # fmt: skip

    @property
    def empty(self) -> bool:
        return not (self.include or self.exclude or self.sets or self.clear) and (
            self.document is None
        )

    def applied_to(self, scope: Scope | None) -> Scope | None:
        """The scope after this change (None: no scope); ScopeError naming the
        field that cannot take its value."""
        if self.clear:
            return None
        scope = parse(self.document) if self.document is not None else scope or EMPTY
        scope = scope.with_patterns(self.include, self.exclude)
        for assignment in self.sets:
            name, equals, value = assignment.partition("=")
            name = name.strip()
            if not equals:
                raise ScopeError(f"{name}: --set takes FIELD=VALUE")
            scope = scope.with_field(name, parse_value(name, value))
        return scope


def overflow_for(settings: BaseSettings, server: redis.Redis, keys: SpiderKeys) -> Any:
    """With FRONTIER_OVERFLOW = "mongo", what sweeps the crawl's MongoDB part
    (close its ``store`` when done); else None."""
    if settings.get("FRONTIER_OVERFLOW") != "mongo":
        return None
    from extensions.frontier.overflow.store import MongoOverflow
    from extensions.scope.overflow_sweep import OverflowSweep

    return OverflowSweep(server, keys, MongoOverflow.from_settings(settings, keys.name))


def _typed(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def apply(
    server: redis.Redis,
    keys: SpiderKeys,
    change: Change,
    *,
    sweep: bool = True,
    overflow: OverflowSweep | None = None,
    progress: Callable[[Swept], Any] = lambda swept: None,
) -> tuple[Scope | None, Swept]:
    """Check the change, store it for every node, then remove what is queued that
    it refuses (``sweep``); the scope now, and what the sweep did."""
    store = ScopeStore(server, keys)
    try:
        current = store.crawl_scope(change.crawl)
    except ScopeError:
        current = None  # another program's: the change starts afresh
    scope = change.applied_to(current)
    store.set_crawl_scope(change.crawl, scope)
    swept = Swept()
    if sweep and scope is not None:
        swept = Sweep(server, keys, overflow).run(change.crawl, progress)
    return scope, swept
