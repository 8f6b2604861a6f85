"""A sitemap's ``<lastmod>`` for the pages kept for a recrawl: read, and told to
the store that keeps them (Redis's frontier or MongoDB's status store, both with
``lastmod(entries) -> (sooner, later)``)."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

LASTMOD_BATCH = 1000  # sitemap entries looked up in one round trip
LASTMOD_SLACK = 86400.0  # s: a lastmod later than now by more is unreadable (clocks, zones)


def apply_lastmods(target: Any, entries: list[tuple[str, str, float]]) -> tuple[int, int]:
    """(fingerprint, group, lastmod) entries told to ``target`` in batches: the
    pages moved sooner (changed since their fetch) and later (unchanged)."""
    sooner = later = 0
    for start in range(0, len(entries), LASTMOD_BATCH):
        moved = target.lastmod(entries[start : start + LASTMOD_BATCH])
        sooner, later = sooner + moved[0], later + moved[1]
    return sooner, later


def parse_lastmod(text: Any) -> float | None:
    """A sitemap ``<lastmod>`` (W3C datetime: ``2026-11-30``,
    ``2026-11-30T10:00:00+01:00``, ``...Z``, or just a year and month) in seconds
    since the epoch, UTC when it names no zone; None if it is none of these."""
    if not isinstance(text, str) or len(text) > 64:
        return None
    text = text.strip()
    if re.fullmatch(r"\d{4}(-\d{2})?", text):
        text += "-01-01"[: 10 - len(text)]
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.timestamp()
