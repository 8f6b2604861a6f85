"""A snapshot of a distributed crawl, read from Redis: what ``scrapy status``
shows and the metrics export."""

from __future__ import annotations

import collections
import json
import math
from typing import TYPE_CHECKING, Any

from extensions import clock, defaults
from extensions.cluster.checkpoint import Checkpoint
from extensions.connection import glob_escape, text
from extensions.crawlid import host_of, render_group
from extensions.frontier.crawls.state import CrawlFigures, Crawls
from extensions.frontier.deadletter import parse_record
from extensions.frontier.frontier import Frontier
from extensions.frontier.part import StatusParts, StatusView

if TYPE_CHECKING:
    import redis

    from extensions.keys import SpiderKeys


#: HTTPS: connections the nodes opened to a host, full handshakes, sessions
#: resumed (its hash's fields, written by extensions/wire/part.py)
TLS_FIELDS = {"connections": "tls_c", "handshakes": "tls_h", "resumed": "tls_r"}


def _number(value: Any, default: float = 0.0) -> float:
    """A number from a record any node (or anyone who can write to Redis) wrote."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return default
    return number if number == number and abs(number) != float("inf") else default


def all_figures(crawls: Crawls) -> list[CrawlFigures]:
    """The figures of every crawl; the crawl without an id first, if it has any."""
    named = [crawls.figures(crawl) for crawl in crawls.ids()]
    frontier = Frontier(crawls.server, crawls.keys, node_id="")
    progress = Checkpoint(crawls.server, crawls.keys, "").crawl_progress()
    rest = crawls.without_id(frontier.sizes(), progress, named)
    shown = [rest] if rest.pending or rest.done or rest.dlq or not named else []
    return shown + named


def crawl_status(
    server: redis.Redis,
    keys: SpiderKeys,
    node_timeout: float = defaults.NODE_TIMEOUT,
    stall_time: float = defaults.NODE_STALL_TIME,
    hours_ahead: int = 24,
    status_store: Any = None,
    parts: StatusParts | None = None,
) -> dict[str, Any]:
    """One snapshot of the crawl: what ``--json`` prints and the metrics export.
    The frontier's parts (FRONTIER_PARTS) add their fields: the recrawls due in
    each of the next ``hours_ahead`` hours, from ``status_store`` where the crawl
    keeps them in MongoDB, the render lane, the crawls under an id."""
    parts = parts or StatusParts.from_settings()
    frontier = Frontier(server, keys, node_id="")
    sizes = frontier.sizes()
    checkpoint = {text(k): _number(v) for k, v in server.hgetall(keys.checkpoint).items()}
    now = clock.now()
    work_waiting = sizes.queued + sizes.delayed + sizes.start_urls > 0
    nodes = node_rows(server, keys, node_timeout, stall_time, work_waiting, parts)
    view = StatusView(server, keys, frontier, sizes, now, node_timeout, hours_ahead, status_store)
    return {
        "spider": keys.name,
        "time": now,
        "done": int(checkpoint.get("done", 0)),
        "discovered": sizes.seen,
        "pages": int(checkpoint.get("pages", 0)),
        "items": int(checkpoint.get("items", 0)),
        "noindex": int(checkpoint.get("noindex", 0)),
        "nofollow": int(checkpoint.get("nofollow", 0)),
        "started": checkpoint.get("started"),
        "updated": checkpoint.get("updated"),
        "start_urls": sizes.start_urls,
        "queued": sizes.queued,
        "in_flight": sizes.in_flight,
        "delayed": sizes.delayed,
        "seen": sizes.seen,
        "dlq": sizes.dlq,
        "hosts": sizes.hosts,
        "ready_hosts": sizes.ready_hosts,
        "held_hosts": sizes.held_hosts,
        "banned_hosts": sizes.banned_hosts,
        "nodes": nodes,
        "webhooks": webhooks_status(server, keys),
        **parts.status(view),
    }


def node_rows(
    server: redis.Redis,
    keys: SpiderKeys,
    node_timeout: float,
    stall_time: float,
    work_waiting: bool,
    parts: StatusParts | None = None,
) -> list[dict[str, Any]]:
    """Every node in the registry: its state (alive, stalled while ``work_waiting``,
    dead, closed) and what its heartbeats report (the parts' fields too)."""
    parts = parts or StatusParts.from_settings()
    clock.measure_server(server)  # the heartbeats are on Redis's clock
    now = clock.now()
    nodes = []
    registry: Any = server.zrange(keys.nodes, 0, -1, withscores=True)
    for raw_id, beat_ms in registry:
        node_id = text(raw_id)
        record = {text(k): text(v) for k, v in server.hgetall(keys.node(node_id)).items()}
        last_beat = beat_ms / 1000
        state = record.get("state", "running")
        alive = state != "closed" and now - last_beat <= node_timeout
        idle_for = now - _number(record.get("last_progress") or record.get("started"), now)
        stalled = alive and work_waiting and idle_for > stall_time
        if state == "closed":
            shown = "closed"
        elif not alive:
            shown = "dead"
        else:
            shown = "stalled" if stalled else "alive"
        memory = int(_number(record.get("rss"), -1))
        nodes.append(
            {
                "node": node_id,
                "state": shown,
                "alive": alive,
                "stalled": stalled,
                "last_heartbeat": last_beat,
                "seconds_since_heartbeat": round(now - last_beat, 1),
                "seconds_since_progress": round(idle_for, 1),
                "pages": int(_number(record.get("pages"))),
                "items": int(_number(record.get("items"))),
                "in_flight": sum(
                    server.zcard(shard.leases(node_id)) for shard in keys.all_shards()
                ),
                "host": record.get("host", ""),
                "pid": int(_number(record.get("pid"))),
                # leased and not yet confirmed; held back: at FRONTIER_MAX_UNCONFIRMED,
                # waiting for its item store before it leases more
                "unconfirmed": int(_number(record.get("unconfirmed"))),
                "held_back": record.get("held_back") == "1",
                # what keeps its item store from taking items ("": nothing)
                "store_problem": record.get("store_problem", "")[:400],
                # resident memory in bytes (None: not reported) and the stack's version
                "memory": memory if memory >= 0 else None,
                "version": record.get("version", "")[:40],
                # Redis's clock minus the node's (s), as its heartbeats measure it
                "clock_skew": round(_number(record.get("skew_ms")) / 1000, 3),
                **parts.node_status(record),
            }
        )
        row = nodes[-1]
        row["notes"] = ["held back: waiting for its item store"] if row["held_back"] else []
        if row["store_problem"]:
            row["notes"].append(
                f"item store: {row['store_problem']} (its pages wait, tried every second)"
            )
        if abs(row["clock_skew"]) > clock.SKEW_WARNING:
            row["notes"].append(
                f"clock {-row['clock_skew']:+.1f} s off Redis's (the crawl runs on Redis's)"
            )
        row["notes"] += parts.node_notes(row)
    return nodes


def webhooks_status(server: redis.Redis, keys: SpiderKeys) -> dict[str, Any]:
    """The webhooks' outbox (extensions/webhooks/): events to send, dead-lettered,
    and why the soonest one to try again failed ("" when none has)."""
    later = keys.named("webhooks_later")
    pipe = server.pipeline(transaction=False)
    pipe.xlen(keys.named("webhooks"))
    pipe.zcard(later)
    pipe.llen(keys.named("webhooks_dead"))
    pipe.zrange(later, 0, 0)
    waiting, retrying, dead, soonest = pipe.execute()
    error = ""
    if soonest:
        try:
            error = str(json.loads(soonest[0]).get("error", ""))[:200]
        except (ValueError, AttributeError):
            error = "an entry that is no event"
    return {"waiting": int(waiting) + int(retrying), "dead": int(dead), "failing": error}


SHARD_FIELDS = ("queued", "in_flight", "delayed", "seen", "hosts", "ready_hosts")


def shard_status(server: redis.Redis, keys: SpiderKeys, shard: int) -> dict[str, Any]:
    """One shard of a sharded frontier: its sizes, where its keys are."""
    scope = keys.shard(shard)
    sizes = Frontier(server, scope, node_id="").sizes()
    return {
        "spider": keys.name,
        "shard": shard,
        "shards": keys.shards,
        "keys": f"{scope.prefix}:*",
        **{field: getattr(sizes, field) for field in SHARD_FIELDS},
    }


def host_status(
    server: redis.Redis, keys: SpiderKeys, budget: int = 0, limit: int | None = None
) -> list[dict[str, Any]]:
    """One row per queue group (host) that was ever given work, busiest first:
    queued, in flight, fetched, rate, next allowed time, budget left, dropped
    (queued and in flight summed over the crawls)."""
    rows = [row for shard in keys.all_shards() for row in _shard_hosts(server, shard, budget)]
    rows.sort(key=lambda row: (-row["queued"], -row["in_flight"], -row["fetched"], row["host"]))
    return rows[:limit] if limit else rows


def _shard_hosts(server: redis.Redis, keys: SpiderKeys, budget: int) -> list[dict[str, Any]]:
    prefix = keys.host("")
    groups = {
        text(key)[len(prefix) :]
        for key in server.scan_iter(match=glob_escape(prefix) + "*", count=1000)
    }
    ready = {text(g) for g in server.zrange(keys.ready, 0, -1)}
    ready |= {host_of(text(g)) for g in server.zrange(keys.ready + ":render", 0, -1)}
    # the crawls under an id queue a host's requests in groups of their own (HOST#ID)
    crawl_groups: dict[str, list[str]] = collections.defaultdict(list)
    for crawl in crawl_ids(server, keys):
        for group in server.sscan_iter(keys.crawl_groups(crawl), count=1000):
            crawl_groups[host_of(text(group))].append(text(group))
        for lane in ("", ":render"):
            found = server.zrange(keys.crawl_ready(crawl) + lane, 0, -1)
            ready |= {host_of(text(g)) for g in found}
    held: Any = server.zrange(keys.waiting, 0, -1, withscores=True)
    waiting = {text(group): score for group, score in held}
    in_flight = leased_by_host(server, keys)
    hosts = {host_of(group) for group in groups} | set(crawl_groups) | set(in_flight)
    return host_rows(server, keys, sorted(hosts), crawl_groups, in_flight, ready, waiting, budget)


def crawl_ids(server: redis.Redis, keys: SpiderKeys) -> list[str]:
    """The ids of the crawls under an id (their number, not the crawl's size)."""
    return [c for c in map(text, server.hkeys(keys.crawls)) if c not in ("*", "")]


def leased_by_host(server: redis.Redis, keys: SpiderKeys) -> collections.Counter[str]:
    """Requests in flight per host: every node's leases (as many as the cluster
    fetches at once, not as the crawl is large)."""
    in_flight: collections.Counter[str] = collections.Counter()
    nodes: Any = server.zrange(keys.nodes, 0, -1)
    for node in nodes:
        members: Any = server.zrange(keys.leases(text(node)), 0, -1)
        for member in members:
            group, newline, _ = member.partition(b"\n")
            if newline:
                in_flight[host_of(text(group))] += 1
    return in_flight


def host_rows(
    server: redis.Redis,
    keys: SpiderKeys,
    hosts: list[str],
    crawl_groups: dict[str, list[str]],
    in_flight: collections.Counter[str],
    ready: set[str],
    waiting: dict[str, float],
    budget: int,
) -> list[dict[str, Any]]:
    """One row for each of ``hosts``: its queue (and its crawls' ``crawl_groups``
    and render lane), state, rate, budget and pushback, 500 hosts a round trip."""
    default_rate = _number(server.hget(keys.rates, "*"))
    now = clock.now()
    rows: list[dict[str, Any]] = []
    for start in range(0, len(hosts), 500):
        chunk = hosts[start : start + 500]
        pipe = server.pipeline(transaction=False)
        for group in chunk:
            pipe.zcard(keys.queue(group))
            pipe.hgetall(keys.host(group))
            pipe.hget(keys.rates, group)
            pipe.hget(keys.crawl_delay, group)
            pipe.hget(keys.named("overflow", group=group), "n")  # FRONTIER_OVERFLOW: out of Redis
            pipe.hgetall(keys.params(group))  # its query parameters learned
        lanes = {group: [*crawl_groups.get(group, ()), render_group(group)] for group in chunk}
        for group in chunk:
            for crawl_group in lanes[group]:
                pipe.zcard(keys.queue(crawl_group))
                pipe.hget(keys.named("overflow", group=crawl_group), "n")
        replies = pipe.execute()
        in_crawls = iter(replies[6 * len(chunk) :])
        for n, group in enumerate(chunk):
            queued, counters, rate, delay, out, params = replies[6 * n : 6 * n + 6]
            spilled = int(_number(out))
            for _ in lanes[group]:
                queued += next(in_crawls)
                spilled += int(_number(next(in_crawls)))
            queued += spilled
            fields = {text(k): text(v) for k, v in counters.items()}
            leased = int(_number(fields.get("leased")))
            accepted = int(_number(fields.get("accepted")))
            held_until = _number(fields.get("hold")) / 1000
            state = "ready" if group in ready else "waiting" if group in waiting else "-"
            if held_until > now:
                state = "banned" if fields.get("why") == "ban" else "backing off"
            adaptive = _number(fields.get("arate"), -1.0)
            rows.append(
                {
                    "host": group,
                    "queued": int(queued),
                    # of the queued, those in MongoDB or on their way (FRONTIER_OVERFLOW)
                    "spilled": spilled,
                    "in_flight": in_flight[group],
                    "fetched": max(leased - in_flight[group], 0),
                    # ready, waiting (politeness), backing off or banned (held for
                    # every node until held_until, for why), or - (no work)
                    "state": state,
                    "held_until": held_until if held_until > now else None,
                    "why": fields.get("why") if held_until > now else None,
                    "pushbacks": int(_number(fields.get("pushbacks"))),
                    "bans": int(_number(fields.get("bans"))),
                    # the rate it adapted to after pushing back (None: its own)
                    "adaptive_rate": round(adaptive, 3) if adaptive >= 0 else None,
                    # why it is slow, for a person to tell a limiter from broken
                    # pages: the refusals / answers it was last slowed on, the
                    # pages refused on their own, the evidence now (decayed)
                    "slowed_on": fields.get("cut") or None,
                    "page_refusals": int(_number(fields.get("page_refusals"))),
                    "evidence": _evidence(fields, now),
                    "rate": _number(rate, default_rate) if rate is not None else default_rate,
                    "crawl_delay": _number(delay) if delay is not None else None,
                    "next_allowed": waiting[group] / 1000 if group in waiting else None,
                    "budget_left": max(budget - accepted, 0) if budget > 0 else None,
                    # CLUSTER_DOMAIN_RATE / CLUSTER_IP_RATE: as the nodes described it
                    "domain": fields.get("dom") or None,
                    "address": fields.get("ip") or None,
                    "observed_rate": _number(fields.get("orate")),
                    "tls": {name: int(_number(fields.get(f))) for name, f in TLS_FIELDS.items()},
                    # the node that leased it last: its connection is warm there
                    "node": fields.get("aff") or None,
                    "dropped": {
                        k.removeprefix("dropped:"): int(_number(v))
                        for k, v in fields.items()
                        if k.startswith("dropped:")
                    },
                    # URL_LEARN_PARAMETERS: parameter -> pairs of pages it did not
                    # change (dropped from URL_LEARN_PAIRS on), or -1: it changed one
                    "learned_parameters": {
                        text(k)[:64]: int(_number(v)) for k, v in list(params.items())[:50]
                    },
                }
            )
    return rows


def _evidence(fields: dict[str, str], now: float) -> str | None:
    """A host's refusals / answers in its evidence window now ('3/120'), or None."""
    answers, refused = _number(fields.get("en")), _number(fields.get("er"))
    since = _number(fields.get("et")) / 1000
    if answers <= 0 or since <= 0:
        return None
    decay = math.exp(-max(now - since, 0) / defaults.HOST_BACKOFF_WINDOW)
    if answers * decay < 0.5:
        return None
    return f"{refused * decay:.0f}/{answers * decay:.0f}"


def top_errors(server: redis.Redis, keys: SpiderKeys, sample: int = 500) -> list[tuple[str, int]]:
    """The most common reasons among the newest dead letters."""
    reasons: collections.Counter[str] = collections.Counter()
    for raw in server.lrange(keys.dlq, 0, sample - 1):
        record = parse_record(raw)
        reasons[str(record.get("error", "?"))[:200] if record else "(malformed record)"] += 1
    return reasons.most_common(5)
