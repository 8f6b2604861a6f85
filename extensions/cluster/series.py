"""The crawl's recent history, per minute, for the console's charts (``NAME:series``).

Every node adds what it did since its last heartbeat (pages, items, errors) to
the minute's fields of one hash, ``MINUTE:p``, ``MINUTE:i`` and ``MINUTE:e``
(``MINUTE`` counts minutes since the epoch), and deletes the minute that just
left the window. The hash holds at most ``SERIES_HOURS`` x 60 x 3 fields
whatever the crawl's size, and expires when no node has written for a window
(minutes no node was alive to delete are swept when a node opens).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from extensions.connection import text

if TYPE_CHECKING:
    import redis
    from redis.client import Pipeline

#: what each chart counts, and the letter its fields end with
KINDS = {"pages": "p", "items": "i", "errors": "e"}

#: the stats a node counts as errors: retries parked, bans met, requests given up
ERROR_STATS = ("retry/delayed", "bans/detected", "retry/dead_lettered")


def window_minutes(hours: float) -> int:
    return max(int(hours * 60), 1)


def add(pipe: Pipeline, key: str, deltas: dict[str, int], now: float, hours: float) -> None:
    """Add one node's ``deltas`` (by kind) to the minute of ``now``."""
    minute = int(now // 60)
    window = window_minutes(hours)
    for kind, value in deltas.items():
        if value > 0:
            pipe.hincrby(key, f"{minute}:{KINDS[kind]}", value)
    pipe.hdel(key, *(f"{minute - window}:{letter}" for letter in KINDS.values()))
    pipe.expire(key, window * 60)


def sweep(server: redis.Redis, key: str, now: float, hours: float) -> int:
    """Delete the minutes older than the window (those no heartbeat deleted)."""
    oldest = int(now // 60) - window_minutes(hours)
    stale = [field for field in server.hkeys(key) if _minute(field) <= oldest]
    return int(server.hdel(key, *stale)) if stale else 0


def read(server: redis.Redis, key: str, now: float, hours: float) -> dict[str, Any]:
    """The window as columns: ``minutes`` (epoch seconds of each minute, oldest
    first, every minute of the window) and one list per kind, zeros where no
    node wrote. Fields anyone else wrote are ignored."""
    last = int(now // 60)
    first = last - window_minutes(hours) + 1
    columns: dict[str, list[int]] = {kind: [0] * (last - first + 1) for kind in KINDS}
    letters = {letter: kind for kind, letter in KINDS.items()}
    raw: Any = server.hgetall(key)
    for field, value in raw.items():
        minute, _, letter = text(field).partition(":")
        kind = letters.get(letter)
        try:
            index, count = int(minute) - first, int(value)
        except ValueError:
            continue
        if kind and 0 <= index <= last - first and count > 0:
            columns[kind][index] = count
    return {"minutes": [(first + i) * 60 for i in range(last - first + 1)], **columns}


def _minute(field: bytes | str) -> int:
    try:
        return int(text(field).partition(":")[0])
    except ValueError:
        return -1  # not ours: swept too


def last_minute_rate(server: redis.Redis, key: str, now: float, kind: str = "pages") -> float:
    """``kind`` per second over about the last minute: the minute under way and
    the one before it, over the seconds they span (what a one-shot ``scrapy
    status`` shows as the rate now, where --watch has two snapshots to compare)."""
    minute = int(now // 60)
    letter = KINDS[kind]
    values: Any = server.hmget(key, [f"{minute}:{letter}", f"{minute - 1}:{letter}"])
    total = 0
    for value in values:
        try:
            total += int(value or 0)
        except ValueError:  # not ours
            continue
    return total / (60 + now - minute * 60)
