"""What a person does in the console, each action logged with who did it (the
log and ``NAME:audit``): replay or delete dead letters, seed start URLs (with a
scope), change a crawl's scope, pause, resume or stop a crawl. Each is the
command line's own code underneath."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from extensions import clock
from extensions.console.readers import LetterFilter, letter_id
from extensions.crawlid import crawl_id_problem
from extensions.frontier.crawls.state import Crawls, UnknownCrawl
from extensions.frontier.deadletter import DeadLetters
from extensions.frontier.frontier import Frontier
from extensions.frontier.seeding import push, validate, with_field
from extensions.scope.changes import Change, apply
from extensions.scope.document import Scope, ScopeError, parse
from extensions.scope.store import ScopeStore
from extensions.urlpolicy import mask_credentials

if TYPE_CHECKING:
    import redis

    from extensions.frontier.start_urls import EntryRules
    from extensions.keys import SpiderKeys

logger = logging.getLogger(__name__)

AUDIT_KEEP = 1000  # actions kept in NAME:audit
CRAWL_ACTIONS = ("pause", "resume", "stop")
MAX_SEED = 10_000  # entries one seed action takes (scrapy seed -f for more)


class ActionRefused(ValueError):
    """An action that cannot be taken as asked; the message says why."""


@dataclass(frozen=True)
class Choice:
    """Which dead letters an action takes: the ids a person ticked, or every
    letter matching a filter (``every``)."""

    ids: frozenset[str] = frozenset()
    every: bool = False
    filter: LetterFilter = field(default_factory=LetterFilter)

    @classmethod
    def from_json(cls, body: Any) -> Choice:
        if not isinstance(body, dict):
            raise ActionRefused("the body must be a JSON object")
        ids = body.get("ids", [])
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise ActionRefused('"ids" must be a list of dead-letter ids')
        raw_filter = body.get("filter") or {}
        if not isinstance(raw_filter, dict):
            raise ActionRefused('"filter" must be an object: {"reason", "host", "q"}')
        fields = {k: str(raw_filter.get(k) or "")[:500] for k in ("reason", "host", "q")}
        every = body.get("all") is True
        if not ids and not every:
            raise ActionRefused('name the dead letters: "ids", or "all": true with a "filter"')
        return cls(frozenset(ids), every, LetterFilter(**fields))

    def select(self, raw: bytes, record: dict[str, Any] | None) -> bool:
        if self.every:
            return self.filter.matches(record)
        return letter_id(raw) in self.ids

    def said(self) -> str:
        if not self.every:
            return f"{len(self.ids)} chosen"
        shown = {k: v for k, v in vars(self.filter).items() if v}
        return f"all matching {json.dumps(shown)}" if shown else "all"


class Actions:
    """The console's actions on one spider's crawl."""

    def __init__(
        self,
        server: redis.Redis,
        keys: SpiderKeys,
        *,
        queue_by: str,
        rules: EntryRules,
        scan: int,
        crawl_budget: int,
    ):
        self.server = server
        self.keys = keys
        self.queue_by = queue_by
        self.rules = rules
        self.scan = scan  # CONSOLE_DLQ_SCAN
        self.crawl_budget = crawl_budget  # CRAWL_PAGE_BUDGET, for a crawl seeded anew

    def replay(self, user: str, choice: Choice) -> dict[str, Any]:
        letters = DeadLetters(self.server, self.keys.dlq, node_id="")
        frontier = Frontier(self.server, self.keys, "console", budget=0)
        replayed, left = letters.replay(
            frontier, self.queue_by, select=choice.select, scan=self.scan
        )
        self.audit(
            user, "dlq replay", f"{choice.said()}: {replayed} replayed, {left} not replayable"
        )
        return {"replayed": replayed, "not_replayable": left}

    def delete(self, user: str, choice: Choice) -> dict[str, Any]:
        letters = DeadLetters(self.server, self.keys.dlq, node_id="")
        deleted = letters.delete(choice.select, self.scan)
        self.audit(user, "dlq delete", f"{choice.said()}: {deleted} deleted")
        return {"deleted": deleted}

    def seed(self, user: str, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict) or not isinstance(body.get("urls"), list):
            raise ActionRefused('the body must be {"urls": [...], "crawl": "ID" (optional), '
                                '"scope": {...} (optional)}')  # fmt: skip
        scope = _seed_scope(body.get("scope"))
        entries = [str(u) for u in body["urls"] if str(u).strip()]
        if not entries or len(entries) > MAX_SEED:
            raise ActionRefused(f"give 1 to {MAX_SEED} URLs (scrapy seed -f FILE for more)")
        crawl = str(body.get("crawl") or "")
        crawls = Crawls(self.server, self.keys)
        state = None
        if crawl:
            problem = crawl_id_problem(crawl)
            if problem:
                raise ActionRefused(f"crawl: {problem}")
            state = crawls.state(crawl)
            if state in ("stopped", "expired"):
                raise ActionRefused(f"crawl {crawl} is {state}: start another id")
        valid: list[str] = []
        refused: list[tuple[str, str]] = []
        for entry in entries:  # each said back as the person wrote it
            wrapped = with_field(entry, "crawl", crawl, keep=True) if crawl else entry
            taken, problems = validate([wrapped], self.rules)
            valid += taken
            refused += [(mask_credentials(entry), reason) for _, reason in problems]
        if valid:
            if crawl:
                crawls.register(crawl, budget=self.crawl_budget if state is None else None)
            if scope is not None:
                ScopeStore(self.server, self.keys).set_crawl_scope(crawl, scope)
            push(self.server, self.keys, valid)
        into = f" into crawl {crawl}" if crawl else ""
        self.audit(user, "seed", f"{len(valid)} start URLs pushed{into}, {len(refused)} refused")
        return {
            "pushed": len(valid),
            "refused": [{"entry": entry[:300], "reason": reason} for entry, reason in refused],
        }

    def scope(self, user: str, body: Any) -> dict[str, Any]:
        """Change a crawl's scope for the cluster, and remove what is queued that
        it refuses (``scrapy scope``'s own code)."""
        try:
            change = Change.from_json(body)
            scope, swept = apply(self.server, self.keys, change)
        except ScopeError as exc:
            raise ActionRefused(str(exc)) from None
        shown = "removed" if scope is None else scope.to_json()
        what = f"crawl {change.crawl or '(no id)'}"
        self.audit(user, "scope", f"{what}: {shown}; {swept.removed} queued requests removed")
        return {"crawl": change.crawl, "scope": None if scope is None else scope.as_dict(),
                "removed": swept.removed}  # fmt: skip

    def crawl(self, user: str, action: str, crawl: str | None) -> dict[str, Any]:
        """Pause, resume or stop one crawl (``""``: the crawl without an id;
        None: pause or resume every crawl)."""
        if action not in CRAWL_ACTIONS:
            raise ActionRefused(f"no action {action!r} (one of {', '.join(CRAWL_ACTIONS)})")
        crawls = Crawls(self.server, self.keys)
        if action == "stop" and not crawl:
            raise ActionRefused("stop takes a crawl under an id")
        if crawl is not None and crawl and crawls.state(crawl) is None:
            raise ActionRefused(f"no crawl {crawl!r} of {self.keys.name}")
        removed = None
        try:
            if action == "stop":
                assert crawl is not None
                before = crawls.state(crawl)
                removed = crawls.stop(crawl) if before not in ("stopped", "expired") else 0
            else:
                before = getattr(crawls, action)(crawl)
        except UnknownCrawl as exc:  # stopped and forgotten meanwhile
            raise ActionRefused(str(exc)) from None
        if before in ("stopped", "expired") and action != "stop":
            raise ActionRefused(f"crawl {crawl} is {before}: it cannot be {action}d")
        what = "every crawl" if crawl is None else f"crawl {crawl or '(no id)'}"
        self.audit(user, action, what + (f": {removed} queued requests removed" if removed else ""))
        return {"crawl": crawl, "action": action, "removed": removed}

    def audit(self, user: str, action: str, detail: str) -> None:
        logger.info("console: %s: %s on %s: %s", user, action, self.keys.name, detail)
        record = {"time": clock.now(), "user": user, "action": action, "detail": detail}
        pipe = self.server.pipeline(transaction=True)
        pipe.lpush(self.keys.audit, json.dumps(record))
        pipe.ltrim(self.keys.audit, 0, AUDIT_KEEP - 1)
        pipe.execute()


def _seed_scope(document: Any) -> Scope | None:
    if document in (None, "", {}):
        return None
    try:
        return parse(document)
    except ScopeError as exc:
        raise ActionRefused(f"scope: {exc}") from None
