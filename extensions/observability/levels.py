"""The crawl's hosts grouped by server address or by registered domain
(``scrapy status NAME --ips`` / ``--domains``, the console's hosts page): what
each level holds, from the host rows (``status.host_rows``) and the levels'
own state (CLUSTER_IP_RATE, CLUSTER_DOMAIN_RATE: its next slot and its line)."""

from __future__ import annotations

import math
from typing import Any

import redis

from extensions import clock
from extensions.connection import text
from extensions.keys import SpiderKeys

#: the host row field each grouping reads, the level's key and rate field
LEVELS = {"address": ("address", "*ip"), "domain": ("domain", "*domain")}
#: hosts not described yet (no level rate, or not leased since one was set)
UNKNOWN = "(not described)"
CUT_SHOWN = 60.0  # seconds an address's cut is shown: its rate recovers over that


def level_rows(
    server: redis.Redis, keys: SpiderKeys, host_rows: list[dict[str, Any]], by: str
) -> list[dict[str, Any]]:
    """One row per address (``by="address"``) or registered domain, busiest
    first: its hosts, queued, in flight, fetched, held hosts, the rate the
    cluster leases it at now (its hosts' together), its limit, the hosts in
    its line, and why its server was held lately (two of its hosts refused)."""
    field, rate_field = LEVELS[by]
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in host_rows:
        groups.setdefault(row.get(field) or UNKNOWN, []).append(row)
    limit_rate = redis_number(server.hget(keys.rates, rate_field))
    names = [name for name in groups if name not in (UNKNOWN, "-", "?")]
    key_of = keys.address if by == "address" else keys.domain
    pipe = server.pipeline(transaction=False)
    for name in names:
        pipe.hmget(key_of(name), "next", "cut", "why")
        pipe.zcard(key_of(name) + ":line")
    replies = iter(pipe.execute())
    state = {name: (next(replies), next(replies)) for name in names}
    now = clock.now()
    rows = []
    for name, hosts in groups.items():
        (next_slot, cut, why), line = state.get(name, ((None, None, None), 0))
        next_at = redis_number(next_slot) / 1000
        # a server that refused (two of its hosts held) within the minute its rate recovers
        refused = text(why)[:20] if why and now - redis_number(cut) / 1000 < CUT_SHOWN else None
        rows.append({
            by: name,
            "hosts": len(hosts),
            "queued": sum(h["queued"] for h in hosts),
            "in_flight": sum(h["in_flight"] for h in hosts),
            "fetched": sum(h["fetched"] for h in hosts),
            "held": sum(1 for h in hosts if h["state"] in ("backing off", "banned")),
            "rate": round(sum(h.get("observed_rate") or 0 for h in hosts), 2),
            "limit": limit_rate or None,
            "line": int(line),
            "next_slot_in": round(next_at - now, 3) if next_at > now else None,
            "server_refused": refused,
            "busiest_hosts": [h["host"] for h in sorted(hosts, key=lambda h: -h["queued"])[:3]],
        })  # fmt: skip
    rows.sort(key=lambda r: (-r["queued"], -r["in_flight"], -r["hosts"], str(r[by])))
    return rows


def redis_number(raw: Any) -> float:
    """A number another writer left in Redis, or 0 (absent or malformed)."""
    try:
        value = float(text(raw)) if raw is not None else 0.0
    except ValueError:
        return 0.0
    return value if math.isfinite(value) and value >= 0 else 0.0
