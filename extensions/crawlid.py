"""Crawl ids: several crawls of one spider share a cluster, each its own job.

A crawl id is a short name (``scrapy seed NAME --crawl ID``, ``"crawl": "ID"``
in a start entry, ``CRAWL_ID`` for a node's own start requests). It is part of
every key that belongs to one job (its queues, dupefilter entries, budget and
figures), never of what belongs to a host (its politeness and backoff).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Any, TypeVar

from extensions.runtime import state_of

Fingerprint = TypeVar("Fingerprint", bytes, str)

#: the stat of the items of the crawl without an id (the heartbeat reports it)
ITEMS_WITHOUT_ID = "crawls/items_of_no_id"
#: what joins a host and a crawl id in a queue group (HOST#CRAWL)
CRAWL_SEPARATOR = "#"
#: what ends the host part of a render lane's group (HOST!render, HOST!render#CRAWL);
#: groups.clean keeps '!' out of host names
RENDER_MARK = "!render"
MAX_CRAWL_ID_LENGTH = 64
_CRAWL_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")

#: the states a crawl under an id is in (NAME:crawls); "finished" is shown for a
#: running crawl with nothing left to do
STATES = ("running", "paused", "stopped", "expired")


def crawl_id_problem(value: object) -> str | None:
    """Why ``value`` is not a crawl id, or None."""
    if not isinstance(value, str):
        return f"crawl id {value!r:.80} is not a string"
    if not value or len(value) > MAX_CRAWL_ID_LENGTH:
        return f"crawl id {value!r:.80} must be 1 to {MAX_CRAWL_ID_LENGTH} characters"
    if not _CRAWL_ID.fullmatch(value):
        return (
            f"crawl id {value!r:.80} may hold only letters, digits and '-', '_', '.' "
            "(and starts with a letter or digit)"
        )
    return None


def crawl_fingerprint(fingerprint: Fingerprint, crawl: str) -> Fingerprint:
    """A request fingerprint within crawl ``crawl``: the same URL is new to each
    crawl. The crawl without an id keeps Scrapy's own fingerprints."""
    if not crawl:
        return fingerprint
    if isinstance(fingerprint, str):  # a hex fingerprint stays hex
        return hashlib.sha1(f"crawl\0{crawl}\0{fingerprint}".encode()).hexdigest()
    return hashlib.sha1(b"crawl\0" + crawl.encode() + b"\0" + fingerprint).digest()


def crawl_group(group: str, crawl: str | None) -> str:
    """The queue group of ``group``'s requests in crawl ``crawl``: ``HOST#CRAWL``,
    or the group itself for the crawl without an id. Politeness stays the
    host's (``host_of``); the queue, its budget count and its data are the crawl's."""
    return f"{group}{CRAWL_SEPARATOR}{crawl}" if crawl else group


def split_group(group: str) -> tuple[str, str]:
    """(host group, crawl id or "") of a queue group (its render lane, if it
    is one, stays on the host group: ``HOST!render``)."""
    host, separator, crawl = group.rpartition(CRAWL_SEPARATOR)
    if separator and host and crawl_id_problem(crawl) is None:
        return host, crawl
    return group, ""


def render_group(group: str) -> str:
    """The queue group of ``group``'s requests that a browser must fetch:
    ``HOST!render`` (``HOST!render#CRAWL``), leased by render nodes alone."""
    host, crawl = split_group(group)
    if host.endswith(RENDER_MARK):
        return group
    return crawl_group(host + RENDER_MARK, crawl or None)


def is_render_group(group: str) -> bool:
    host = split_group(group)[0]
    return len(host) > len(RENDER_MARK) and host.endswith(RENDER_MARK)


def host_of(group: str) -> str:
    """The host part of a queue group: what its politeness is keyed by, shared by
    every crawl and both lanes (plain and render) of the host."""
    host = split_group(group)[0]
    if len(host) > len(RENDER_MARK) and host.endswith(RENDER_MARK):
        return host[: -len(RENDER_MARK)]
    return host


def crawls_of(groups: Iterable[str]) -> dict[str, int]:
    """How many of ``groups`` (one per request) belong to each crawl under an id."""
    counts: dict[str, int] = {}
    for group in groups:
        crawl = split_group(group)[1]
        if crawl:
            counts[crawl] = counts.get(crawl, 0) + 1
    return counts


def crawl_fields(crawl: str | None) -> dict[str, Any]:
    """What a dead-letter record says of its crawl: ``crawl``, if it is one."""
    return {"crawl": crawl} if crawl and crawl_id_problem(crawl) is None else {}


def item_counts(crawler: Any) -> dict[str, int]:
    """Items scraped per crawl under an id since the scheduler's last flush
    (spidermiddlewares/crawlid.py counts, the frontier's crawls part writes them)."""
    return state_of(crawler, "crawl_items", dict)
