"""What a page kept for a recrawl is in Redis and MongoDB: its revisit record
(``GROUP\nJSON`` of the request that fetches it again, its recrawl state in
``meta["recrawl"]``), read defensively (anyone who can write to Redis can write
there), and the schedule's summary."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from extensions.meta import RECRAWL


@dataclass(frozen=True)
class RecrawlSchedule:
    #: pages kept for a recrawl (queued, in flight or waiting for their date)
    pages: int
    #: of them, waiting and due now
    due: int
    #: waiting and falling due in each of the next hours
    due_by_hour: list[int]


def revisit_page(record: bytes) -> tuple[str, float | None] | None:
    """A revisit record's URL and last fetch time, or None if it is not one
    (anyone who can write to Redis can write there)."""
    page = revisit_state(record)
    return None if page is None else page[:2]


def revisit_state(record: bytes) -> tuple[str, float | None, float | None] | None:
    """A revisit record's ("GROUP\nJSON") URL, last fetch time and interval."""
    return revisit_request(record.partition(b"\n")[2])


def revisit_request(data: bytes | str) -> tuple[str, float | None, float | None] | None:
    """A revisit request's (its JSON's) URL, last fetch time and interval, or
    None if it is not one."""
    try:
        request = json.loads(data)
    except ValueError:
        return None
    if not isinstance(request, dict) or not isinstance(request.get("url"), str):
        return None
    meta = request.get("meta")
    state = meta.get(RECRAWL) if isinstance(meta, dict) else None
    if not isinstance(state, dict):
        return request["url"], None, None
    return request["url"], _seconds(state.get("fetched_at")), _seconds(state.get("interval"))


def _seconds(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if 0 <= value < 1e11 else None
