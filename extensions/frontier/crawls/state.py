"""Several crawls of one spider in one frontier: their registry, pause, resume
and stop, their expiry, and their figures.

A crawl under an id keeps its requests in queue groups ``HOST#ID``
(``extensions.crawlid``); its state is read by every lease (``scripts/_crawls.lua``),
so pausing one is one write per scope and costs the other crawls nothing, however
much it holds. The crawl without an id is the spider's crawl as it always was.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from extensions import connection
from extensions.cluster.checkpoint import now_ms
from extensions.crawlid import crawl_id_problem
from extensions.frontier.manifest import Manifest
from extensions.frontier.redisops import execute, fields, load_script, run_named

if TYPE_CHECKING:
    import redis

    from extensions.frontier.results import FrontierSizes
    from extensions.keys import SpiderKeys

logger = logging.getLogger(__name__)

#: every crawl (pause and resume without --crawl)
ALL = "*"
#: requests one drain call removes at most: a stopped crawl of millions must not stall Redis
DRAIN_BATCH = 5000
#: crawls one heartbeat ends or empties at most
ENDS_PER_BEAT = 4

#: counters the scripts keep in each scope's NAME:crawl:ID, summed over shards
SCOPE_COUNTERS = ("queued", "in_flight", "delayed", "removed", "dropped")
#: counters the nodes keep under NAME
NODE_COUNTERS = ("done", "items", "dlq")


class UnknownCrawl(LookupError):
    pass


@dataclass
class CrawlFigures:
    crawl: str
    state: str
    queued: int = 0
    in_flight: int = 0
    delayed: int = 0
    done: int = 0
    items: int = 0
    dlq: int = 0
    removed: int = 0
    dropped: int = 0
    weight: float = 1.0
    budget: int = 0
    started: float | None = None
    updated: float | None = None
    expires: float | None = None

    @property
    def pending(self) -> int:
        return self.queued + self.in_flight + self.delayed

    @property
    def shown_state(self) -> str:
        """The state, with "finished" for a running crawl that has nothing left."""
        if self.state == "running" and not self.pending and (self.done or self.dlq):
            return "finished"
        return self.state

    def as_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["state"] = self.shown_state
        data["last_activity"] = data.pop("updated")
        return data


def _number(value: Any, kind: type = int) -> Any:
    try:
        return kind(float(connection.text(value)))
    except (TypeError, ValueError):
        return kind(0)


def _seconds(value: Any) -> float | None:
    ms = _number(value, float) if value is not None else 0.0
    return ms / 1000 if ms > 0 else None


class Crawls:
    """The crawls of one spider, for the commands and the nodes."""

    def __init__(self, server: redis.Redis, keys: SpiderKeys):
        self.server = server
        self.keys = keys
        self.scopes = [keys] if keys.shards == 1 else [keys, *keys.all_shards()]
        self._control = server.register_script(load_script("crawl_control"))
        self.manifest = Manifest(server, keys)  # draining goes through the crawl's pieces
        self._known: set[str] = set()  # ids this node registered already

    # --- the registry -----------------------------------------------------------

    def register(
        self,
        crawl: str,
        *,
        weight: float | None = None,
        budget: int | None = None,
        expire_after: float = 0.0,
    ) -> bool:
        """Record crawl ``crawl``, new or again; what is given of its weight,
        budget and expiry is set (a budget is split evenly over the shards).
        True if it was new."""
        problem = crawl_id_problem(crawl)
        if problem:
            raise ValueError(problem)
        now = now_ms()
        new = bool(self.server.hsetnx(self.keys.crawls, crawl, "running"))
        pipe = self.server.pipeline(transaction=False)
        pipe.hsetnx(self.keys.crawl(crawl), "started", now)
        shards = len(self.scopes) - 1 or 1
        for index, scope in enumerate(self.scopes):
            if weight is not None:
                pipe.hset(scope.crawl(crawl), "weight", weight)
            if budget is not None:
                share = budget if index == 0 or not budget else -(-budget // shards)
                pipe.hset(scope.crawl(crawl), "budget", share)
        if expire_after > 0:
            expires = now + int(expire_after * 1000)
            pipe.hset(self.keys.crawl(crawl), "expires", expires)
            pipe.zadd(self.keys.crawl_ends, {crawl: expires})
        pipe.execute()
        self._known.add(crawl)
        return new

    def ensure(self, crawl: str) -> None:
        """Register a crawl a node met in a start entry or a queue entry, once per node."""
        if crawl in self._known:
            return
        if self.server.hsetnx(self.keys.crawls, crawl, "running"):
            self.server.hsetnx(self.keys.crawl(crawl), "started", now_ms())
            logger.info("a new crawl of %s: %s", self.keys.name, crawl)
        self._known.add(crawl)

    def states(self) -> dict[str, str]:
        """Every crawl under an id and its state, in one read ('*' and '' left out:
        a pause of every crawl, and of the crawl without an id, are in ``all_paused``
        and ``state("")``)."""
        raw: Any = self.server.hgetall(self.keys.crawls)
        found = {connection.text(k): connection.text(v) for k, v in raw.items()}
        return {c: found[c] for c in sorted(found) if c not in (ALL, "")}

    def ids(self) -> list[str]:
        return list(self.states())

    def state(self, crawl: str) -> str | None:
        """The crawl's state, None for an id never registered ("" is the crawl
        without an id, always there)."""
        value = self.server.hget(self.keys.crawls, crawl)
        if value is None:
            return "running" if crawl == "" else None
        return connection.text(value)

    def all_paused(self) -> bool:
        return connection.text(self.server.hget(self.keys.crawls, ALL) or b"") == "paused"

    # --- pause, resume, stop ------------------------------------------------------

    def _known_or_raise(self, crawl: str) -> str:
        state = self.state(crawl)
        if state is None:
            raise UnknownCrawl(f"no crawl {crawl!r} of {self.keys.name}")
        return state

    def _in_every_scope(self, op: str, crawl: str) -> None:
        pipe = self.server.pipeline(transaction=False)
        for scope in self.scopes:
            run_named(
                self._control,
                {"crawls": scope.crawls, "turns": scope.turns, "ready": scope.ready},
                {"op": op, "crawl": crawl, "data_prefix": scope.data("")},
                pipe,
            )
        execute(pipe)

    def pause(self, crawl: str | None = None) -> str:
        """Pause one crawl (or all): no lease hands out its requests from the next
        one on; what is in flight finishes. Returns its state before."""
        target = ALL if crawl is None else crawl
        before = "running" if crawl is None else self._known_or_raise(crawl)
        if before in ("stopped", "expired"):
            return before
        self._in_every_scope("pause", target)
        return before

    def resume(self, crawl: str | None = None) -> str:
        target = ALL if crawl is None else crawl
        before = "running" if crawl is None else self._known_or_raise(crawl)
        if before in ("stopped", "expired"):
            return before
        if crawl is not None and self.all_paused():
            # resuming one crawl while all are paused: the others stay paused
            self.server.hdel(self.keys.crawls, ALL)
            for scope in self.scopes:
                self.server.hdel(scope.crawls, ALL)
            others = {"": self.state("") or "running", **self.states()}
            for other, state in others.items():
                if other != crawl and state == "running":
                    self._in_every_scope("pause", other)
        self._in_every_scope("resume", target)
        return before

    def stop(self, crawl: str, state: str = "stopped", calls: int = 10_000) -> int:
        """End a crawl under an id: nothing of it is leased again, its queued
        requests are removed (returned: how many; at most ``calls`` drain calls
        per scope now, the rest by the heartbeats); its done records stay."""
        if not crawl:
            raise ValueError("only a crawl under an id can be stopped")
        self._known_or_raise(crawl)
        self._in_every_scope(state, crawl)
        self.server.hset(self.keys.crawl(crawl), "ended", now_ms())
        self.server.zadd(self.keys.crawl_ends, {crawl: 0})  # emptied by heartbeats if cut short
        return self.drain(crawl, calls)

    def drain(self, crawl: str, calls: int = 10_000) -> int:
        """Remove a stopped crawl's queued requests, DRAIN_BATCH per call."""
        removed = 0
        for scope in self.scopes:
            for _ in range(calls):
                drained = fields(run_named(
                    self.manifest.script("crawl_drain"),
                    {"groups": scope.crawl_groups(crawl), "waiting": scope.waiting,
                     "frontier": scope.frontier},
                    {"crawl": crawl, "queue_prefix": scope.queue(""),
                     "data_prefix": scope.data(""), "batch": DRAIN_BATCH},
                ))  # fmt: skip
                removed += int(drained["removed"])
                if not int(drained["more"]):
                    break
            else:
                return removed  # the rest at the next heartbeat
        self.server.zrem(self.keys.crawl_ends, crawl)
        return removed

    def end_due(self) -> list[tuple[str, str, int]]:
        """A heartbeat's part: stop the crawls whose expiry passed, and finish
        emptying stopped ones. Returns (crawl, state, requests removed) of each."""
        due = self.server.zrangebyscore(self.keys.crawl_ends, 0, now_ms(), 0, ENDS_PER_BEAT)
        ended = []
        for raw in due:
            crawl = connection.text(raw)
            state = self.state(crawl)
            if state is None:
                self.server.zrem(self.keys.crawl_ends, crawl)
                continue
            if state in ("running", "paused"):
                # a heartbeat's share: the next ones empty the rest
                removed = self.stop(crawl, "expired", calls=1)
                ended.append((crawl, "expired", removed))
            else:
                ended.append((crawl, state, self.drain(crawl, calls=1)))
        return ended

    # --- figures ------------------------------------------------------------------

    def figures(self, crawl: str) -> CrawlFigures:
        state = self._known_or_raise(crawl)
        if state == "running" and self.all_paused():
            state = "paused"
        pipe = self.server.pipeline(transaction=False)
        for scope in self.scopes:
            pipe.hgetall(scope.crawl(crawl))
        parts = [{connection.text(k): v for k, v in part.items()} for part in pipe.execute()]
        own = parts[0]
        figures = CrawlFigures(
            crawl=crawl,
            state=state,
            weight=_number(own.get("weight", 1), float) or 1.0,
            budget=_number(own.get("budget", 0)),
            started=_seconds(own.get("started")),
            updated=_seconds(own.get("updated")),
            expires=_seconds(own.get("expires")),
        )
        for name in SCOPE_COUNTERS:
            setattr(figures, name, max(sum(_number(part.get(name, 0)) for part in parts), 0))
        for name in NODE_COUNTERS:
            setattr(figures, name, _number(own.get(name, 0)))
        return figures

    def without_id(self, sizes: FrontierSizes, progress: dict[str, Any],
                   named: list[CrawlFigures]) -> CrawlFigures:  # fmt: skip
        """The crawl without an id: the spider's figures less the named crawls'."""
        state = "paused" if self.all_paused() else (self.state("") or "running")

        def rest(total: int, name: str) -> int:
            return max(int(total) - sum(getattr(f, name) for f in named), 0)

        return CrawlFigures(
            crawl="",
            state=state,
            queued=rest(sizes.queued, "queued"),
            in_flight=rest(sizes.in_flight, "in_flight"),
            delayed=rest(sizes.delayed, "delayed"),
            done=rest(_number(progress.get("done", 0)), "done"),
            # counted by the nodes; the difference of the totals for a crawl begun
            # before they counted it
            items=(
                _number(progress["items_no_id"])
                if "items_no_id" in progress
                else rest(_number(progress.get("items", 0)), "items")
            ),
            dlq=rest(sizes.dlq, "dlq"),
        )

    def paused_pending(self, sizes: FrontierSizes) -> int:
        """Requests queued or parked in paused crawls: work no node may take
        until a resume (so it does not keep an idle node open)."""
        if self.all_paused():
            return sizes.queued + sizes.delayed
        states = self.states()
        if self.state("") == "paused":
            states[""] = "paused"
        paused = [c for c, state in states.items() if state == "paused"]
        if not paused:
            return 0  # asked at every idle look: two reads, whatever the crawls hold
        named = [self.figures(c) for c in states if c]
        figures = {f.crawl: f for f in named}
        if "" in paused:
            figures[""] = self.without_id(sizes, {}, named)
        return sum(figures[c].queued + figures[c].delayed for c in paused)


def stamp(seconds: float | None) -> str:
    if not seconds:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds))
