"""What the console's views read from Redis.

Each view costs a bounded number of Redis commands, however large the crawl: sizes
come from counters and cardinalities, hosts from a window of the frontier's ready,
waiting and held sets (never a scan of every host), dead letters from at most
``CONSOLE_DLQ_SCAN`` of the newest records. What grows is what a person asked to
see (a page of hosts, a page of dead letters), the nodes, the shards and the crawls.
"""

from __future__ import annotations

import collections
import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from extensions import clock
from extensions.cluster import series
from extensions.connection import text
from extensions.crawlid import crawl_group, host_of
from extensions.frontier.crawls.state import Crawls
from extensions.frontier.deadletter import parse_record
from extensions.frontier.frontier import Frontier
from extensions.frontier.part import StatusParts
from extensions.frontier.ranks.state import HostRanks
from extensions.observability.levels import redis_number
from extensions.observability.status import (
    all_figures,
    crawl_ids,
    crawl_status,
    host_rows,
    leased_by_host,
    node_rows,
    top_errors,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

    import redis

    from extensions.keys import SpiderKeys

#: the host views: every kind of host with work, or one state
HOST_STATES = ("active", "ready", "waiting", "held", "banned")
RANKED_SHOWN = 20  # the best-ranked hosts the hosts page lists
DLQ_CHUNK = 1000  # dead letters read per round trip while filtering
BUSIEST = 10  # hosts on a spider's page


@dataclass(frozen=True)
class Limits:
    """What the console's reads are bounded by (its settings)."""

    node_timeout: float
    stall_time: float
    host_page_budget: int
    series_hours: float
    dlq_scan: int
    #: HOST_BUDGET_BY_RANK, when set (a RankBudget): the budgets the ranked hosts show
    rank_budget: Any = None
    #: the frontier's parts (FRONTIER_PARTS): their status fields and node notes
    parts: StatusParts = field(default_factory=StatusParts.from_settings)


def status(
    server: redis.Redis, keys: SpiderKeys, limits: Limits, status_store: Any = None
) -> dict[str, Any]:
    """Exactly what ``scrapy status NAME --json`` prints (``status_store``: the
    crawl's recrawl schedule in MongoDB, with RECRAWL_STORE = "mongo")."""
    return crawl_status(
        server,
        keys,
        limits.node_timeout,
        limits.stall_time,
        status_store=status_store,
        parts=limits.parts,
    )


def summary(
    server: redis.Redis, keys: SpiderKeys, limits: Limits, status_store: Any = None
) -> dict[str, Any]:
    """A spider on the overview: its status and its crawls."""
    return {
        "status": status(server, keys, limits, status_store),
        "crawls": [figures.as_dict() for figures in all_figures(Crawls(server, keys))],
    }


def spider_view(
    server: redis.Redis, keys: SpiderKeys, limits: Limits, status_store: Any = None
) -> dict[str, Any]:
    """A spider's page: its summary, the busiest hosts, the top errors, recent actions."""
    return {
        **summary(server, keys, limits, status_store),
        "figures": limits.parts.figures,
        "busiest": hosts(server, keys, limits, "active", limit=BUSIEST)["hosts"],
        "errors": top_errors(server, keys),
        "audit": audit_log(server, keys, 20),
    }


def series_of(server: redis.Redis, keys: SpiderKeys, limits: Limits) -> dict[str, Any]:
    return series.read(server, keys.series, clock.now(), limits.series_hours)


def audit_log(server: redis.Redis, keys: SpiderKeys, count: int) -> list[dict[str, Any]]:
    """The newest actions, each with its four fields whatever was written."""
    rows = []
    for raw in server.lrange(keys.audit, 0, count - 1):
        record = parse_record(raw)
        if record is not None:
            stamp = record.get("time")
            rows.append(
                {
                    "time": stamp if isinstance(stamp, (int, float)) else None,
                    **{k: str(record.get(k, ""))[:500] for k in ("user", "action", "detail")},
                }
            )
    return rows


def nodes(server: redis.Redis, keys: SpiderKeys, limits: Limits) -> list[dict[str, Any]]:
    """The spider's nodes (the frontier's sizes tell a stalled one; nothing else
    of the crawl's status is read)."""
    sizes = Frontier(server, keys, node_id="").sizes()
    waiting = sizes.queued + sizes.delayed + sizes.start_urls > 0
    rows = node_rows(server, keys, limits.node_timeout, limits.stall_time, waiting, limits.parts)
    return [{**row, "spider": keys.name} for row in rows]


def hosts(
    server: redis.Redis,
    keys: SpiderKeys,
    limits: Limits,
    state: str = "active",
    offset: int = 0,
    limit: int = 50,
    host: str = "",
    group: str = "",
) -> dict[str, Any]:
    """A window of the hosts: those of one ``state`` (ready, waiting for their
    politeness slot, held after pushing back, banned), ``limit`` from ``offset``;
    "active" takes the first of each kind, the busiest first; ``host`` one host.
    With the totals of each kind, for paging."""
    if state not in HOST_STATES:
        raise ValueError(f"state must be one of {', '.join(HOST_STATES)}")
    now_ms = clock.now_ms()
    totals: collections.Counter[str] = collections.Counter()
    rows: list[dict[str, Any]] = []
    for index, scope in enumerate(keys.all_shards()):
        pipe = server.pipeline(transaction=False)
        pipe.zcard(scope.ready)
        pipe.zcard(scope.waiting)
        pipe.zcount(scope.held, now_ms, "+inf")
        pipe.zcount(scope.banned, now_ms, "+inf")
        for kind, count in zip(("ready", "waiting", "held", "banned"), pipe.execute(), strict=True):
            totals[kind] += int(count)
        crawls = crawl_ids(server, scope)
        if host:
            chosen = [host] if keys.shard_of(host) == index else []
        else:
            chosen = _window(server, scope, crawls, state, offset, limit, now_ms)
        rows.extend(_rows(server, scope, crawls, chosen, limits.host_page_budget))
    if state == "active":
        rows.sort(key=lambda r: (-r["queued"], -r["in_flight"], r["host"]))
    rows = rows[:limit]
    if group in ("address", "domain"):  # the window's hosts, side by side by server or site
        rows.sort(key=lambda r: (r.get(group) or "~", -r["queued"], r["host"]))
    budget = limits.rank_budget or limits.host_page_budget
    return {"hosts": rows, "totals": dict(totals), "state": state, "offset": offset,
            "group": group if group in ("address", "domain") else "",
            "lines": _lines(server, keys, limit),
            "ranked": HostRanks(server, keys).top_rows(RANKED_SHOWN, budget)}  # fmt: skip


def _lines(server: redis.Redis, keys: SpiderKeys, limit: int) -> list[dict[str, Any]]:
    """The domains and addresses whose hosts wait in a line (CLUSTER_DOMAIN_RATE,
    CLUSTER_IP_RATE), the soonest woken first: hosts waiting, next slot."""
    found = []
    for scope in keys.all_shards():
        levels = [text(key) for key in server.zrange(scope.lines, 0, limit - 1)]
        pipe = server.pipeline(transaction=False)
        for level in levels:
            pipe.zcard(level + ":line")
            pipe.hget(level, "next")
        replies = iter(pipe.execute())
        for level in levels:
            waiting, next_slot = next(replies), next(replies)
            kind = "address" if level.startswith(scope.address("")) else "domain"
            name = level.removeprefix(scope.address("")).removeprefix(scope.domain(""))
            at = redis_number(next_slot) / 1000 or None
            found.append({"kind": kind, "name": name, "waiting": int(waiting), "next_slot": at})
    return found[:limit]


def _window(
    server: redis.Redis,
    keys: SpiderKeys,
    crawls: list[str],
    state: str,
    offset: int,
    limit: int,
    now_ms: int,
) -> list[str]:
    end = offset + limit - 1
    if state in ("held", "banned"):
        key = keys.held if state == "held" else keys.banned
        found: Any = server.zrangebyscore(key, now_ms, "+inf", start=offset, num=limit)
        return list(dict.fromkeys(host_of(text(group)) for group in found))
    if state == "waiting":
        found = server.zrange(keys.waiting, offset, end)
        return list(dict.fromkeys(host_of(text(group)) for group in found))
    # ready: the crawl without an id's groups and each crawl's (HOST#ID), merged;
    # active: the first of each kind, as many as one page shows
    pipe = server.pipeline(transaction=False)
    readies = [keys.ready, *(keys.crawl_ready(crawl) for crawl in crawls)]
    for key in readies:
        pipe.zrange(key, 0, end if state == "ready" else limit - 1)
    if state == "active":
        pipe.zrangebyscore(keys.held, now_ms, "+inf", start=0, num=limit)
        pipe.zrange(keys.waiting, 0, limit - 1)
    hosts = list(dict.fromkeys(host_of(text(g)) for part in pipe.execute() for g in part))
    return hosts[offset : offset + limit] if state == "ready" else hosts


def _rows(
    server: redis.Redis, keys: SpiderKeys, crawls: list[str], chosen: list[str], budget: int
) -> list[dict[str, Any]]:
    if not chosen:
        return []
    crawl_groups = {host: [crawl_group(host, crawl) for crawl in crawls] for host in chosen}
    pipe = server.pipeline(transaction=False)
    for host in chosen:
        for crawl in ["", *crawls]:  # each crawl's group of the host
            pipe.zscore(keys.crawl_ready(crawl), crawl_group(host, crawl))
            pipe.zscore(keys.waiting, crawl_group(host, crawl))
    scores = iter(pipe.execute())
    ready: set[str] = set()
    waiting: dict[str, float] = {}
    for host in chosen:
        for _ in range(len(crawls) + 1):
            in_ready, waits = next(scores), next(scores)
            if in_ready is not None:
                ready.add(host)
            if waits is not None:
                waiting[host] = min(float(waits), waiting.get(host, float("inf")))
    in_flight = leased_by_host(server, keys)
    return host_rows(server, keys, chosen, crawl_groups, in_flight, ready, waiting, budget)


# --- dead letters -------------------------------------------------------------


def letter_id(raw: bytes | str) -> str:
    """A dead letter's id in the console: a hash of the record as stored."""
    data = raw if isinstance(raw, bytes) else raw.encode("utf-8", "surrogateescape")
    return hashlib.sha256(data).hexdigest()[:20]


@dataclass(frozen=True)
class LetterFilter:
    """Which dead letters: a reason (the kind or text of the error), a host, a
    text in the URL; empty matches all."""

    reason: str = ""
    host: str = ""
    q: str = ""

    @property
    def empty(self) -> bool:
        return not (self.reason or self.host or self.q)

    def matches(self, record: dict[str, Any] | None) -> bool:
        if self.empty:
            return True
        if record is None:
            return False
        url = str(record.get("url", ""))
        if self.q and self.q.lower() not in url.lower():
            return False
        if self.host and _host(url) != self.host.lower():
            return False
        if self.reason:
            said = f"{record.get('kind', '')} {record.get('error', '')}".lower()
            if self.reason.lower() not in said:
                return False
        return True


def _host(url: str) -> str:
    try:
        return (urlsplit(url).hostname or "").lower()
    except ValueError:
        return ""


def scan_letters(
    server: redis.Redis, keys: SpiderKeys, scan: int
) -> Iterator[tuple[int, bytes, dict[str, Any] | None]]:
    """The newest ``scan`` dead letters: (index, raw, record or None), newest first."""
    for start in range(0, scan, DLQ_CHUNK):
        chunk: Any = server.lrange(keys.dlq, start, min(start + DLQ_CHUNK, scan) - 1)
        for n, raw in enumerate(chunk):
            yield start + n, raw, parse_record(raw)
        if len(chunk) < DLQ_CHUNK:
            return


def dead_letters(
    server: redis.Redis,
    keys: SpiderKeys,
    limits: Limits,
    chosen: LetterFilter,
    offset: int = 0,
    limit: int = 50,
) -> dict[str, Any]:
    """A page of dead letters, newest first, with how many match (among the
    newest ``CONSOLE_DLQ_SCAN`` when filtered) and how many there are."""
    total = int(server.llen(keys.dlq))
    rows: list[dict[str, Any]] = []
    if chosen.empty:
        page: Any = server.lrange(keys.dlq, offset, offset + limit - 1)
        rows = [_letter(raw, parse_record(raw)) for raw in page]
        matched, scanned = total, total
    else:
        matched = scanned = 0
        for _, raw, record in scan_letters(server, keys, limits.dlq_scan):
            scanned += 1
            if chosen.matches(record):
                if offset <= matched < offset + limit:
                    rows.append(_letter(raw, record))
                matched += 1
    return {
        "total": total,
        "matched": matched,
        "scanned": scanned,
        "complete": scanned >= total,
        "offset": offset,
        "limit": limit,
        "letters": rows,
        "reasons": top_errors(server, keys),
    }


def _letter(raw: bytes, record: dict[str, Any] | None) -> dict[str, Any]:
    """One dead letter as the console shows it: the fields a person reads,
    whatever their type in the record (anyone may have written it)."""
    if record is None:
        return {"id": letter_id(raw), "malformed": True, "raw": text(raw)[:500]}
    stamp = record.get("time")
    return {
        "id": letter_id(raw),
        "url": str(record.get("url", ""))[:2000],
        "kind": str(record.get("kind", "?"))[:60],
        "error": str(record.get("error", ""))[:2000],
        "time": stamp if isinstance(stamp, (int, float)) and 0 <= stamp < 1e11 else None,
        "node": str(record.get("node", ""))[:100],
        "retry_times": record.get("retry_times")
        if isinstance(record.get("retry_times"), int)
        else 0,
        "crawl": str(record.get("crawl", ""))[:64],
        "replayable": isinstance(record.get("request"), str),
    }
