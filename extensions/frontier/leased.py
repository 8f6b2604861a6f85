"""Each request as the scheduler handed it out, before the downloader's
middlewares added their headers and meta (user agent, Accept, client hints,
proxy, timeouts).

What is stored for a later fetch (a retry waiting in Redis, a dead letter, a
page kept for a recrawl) is the request as leased: the later fetch adds its
own, so one fetch's identity is never pinned to the next.
"""

from __future__ import annotations

import json
import logging
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from extensions import clock
from extensions.connection import text
from extensions.crawlid import crawl_fields, split_group
from extensions.exceptions import SerializationError
from extensions.frontier.serializer import loads_request
from extensions.meta import DELAY_UNTIL, HOST_WATCHED, SEND_SLOT
from extensions.runtime import state_of

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler

    from extensions.frontier.context import LeaseCheck
    from extensions.frontier.results import Lease

logger = logging.getLogger(__name__)


class LeasedRequests:
    """One crawler's requests as the scheduler leased them (node-local, by request
    object): the header names and meta keys each was leased with."""

    def __init__(self) -> None:
        self._names: weakref.WeakKeyDictionary[Request, tuple[frozenset[bytes], frozenset[str]]] = (
            weakref.WeakKeyDictionary()
        )
        self._leases: weakref.WeakKeyDictionary[Request, bytes] = weakref.WeakKeyDictionary()

    def remember(self, request: Request, lease: bytes = b"") -> None:
        self._names[request] = (frozenset(request.headers), frozenset(request.meta))
        if lease:
            self._leases[request] = lease

    def member_of(self, request: Request) -> bytes:
        """The lease member (``GROUP\nID``) the request was leased under, or b''."""
        return self._leases.get(request, b"")

    def lease_of(self, request: Request) -> str:
        """The lease (``GROUP ID``) the request was leased under, or ''."""
        return self._leases.get(request, b"").decode("utf-8", "replace").replace("\n", " ")

    def __contains__(self, request: Request) -> bool:
        """Whether ``request`` came from the scheduler (not robots.txt, not
        ``engine.download``)."""
        return request in self._names

    def meta_keys(self, request: Request) -> frozenset[str]:
        return self._names[request][1]

    def drop_downloader_headers(self, leased: Request, request: Request) -> None:
        """Take from ``request`` (``leased`` itself or a copy of it) the headers the
        downloader's middlewares added to ``leased`` after it was leased; nothing
        when ``leased`` did not come from the scheduler."""
        names = self._names.get(leased)
        if names is None:
            return
        for name in [name for name in request.headers if name not in names[0]]:
            del request.headers[name]

    def drop_downloader_meta(self, leased: Request, request: Request) -> None:
        """Take from ``request`` (a copy of ``leased``) the meta keys the downloader's
        middlewares added to ``leased`` after it was leased (its proxy, download
        slot, ban marks), so the next fetch chooses them afresh; nothing when
        ``leased`` did not come from the scheduler."""
        names = self._names.get(leased)
        if names is None:
            return
        for key in [key for key in request.meta if key not in names[1]]:
            del request.meta[key]

    def parked(self, leased: Request, until: float) -> Request:
        """A copy of ``leased`` that goes back to the frontier to wait until
        ``until`` (its lease is released once the copy is queued): fetched again
        from scratch, by whichever node leases it then."""
        parked = leased.copy()
        parked.dont_filter = True
        self.drop_downloader_headers(leased, parked)
        self.drop_downloader_meta(leased, parked)  # a new proxy and slot next time
        for key in (SEND_SLOT, HOST_WATCHED):
            parked.meta.pop(key, None)
        parked.meta[DELAY_UNTIL] = max(until, clock.now())
        return parked


def leased_for(crawler: Crawler) -> LeasedRequests:
    """The crawler's leased requests: the scheduler remembers, the middlewares read."""
    return state_of(crawler, LeasedRequests, LeasedRequests)


class Unreadable(NamedTuple):
    """A leased queue entry that is no request: what its dead letter says."""

    member: bytes
    url: str
    error: str
    raw: str


def requests_of(
    leases: list[Lease], spider: Spider
) -> tuple[list[tuple[Request, bytes]], list[Unreadable]]:
    """The requests of a lease, each with its lease member and its send slot in
    its meta; and the entries that are not requests (anyone who can write to
    Redis can write a queue entry)."""
    requests: list[tuple[Request, bytes]] = []
    unreadable: list[Unreadable] = []
    for member, data, slot, window, watched, _claim in leases:
        try:
            if not data:  # an id in a queue with no JSON stored for it
                raise SerializationError(f"no request stored for queue entry {member!r:.200}")
            request = loads_request(data, spider)
        except SerializationError as exc:
            raw = data.decode("utf-8", "replace")[:100_000]
            unreadable.append(Unreadable(member, _url_of(data), str(exc), raw))
            continue
        if slot:
            request.meta[SEND_SLOT] = [slot, window]
        if watched:
            request.meta[HOST_WATCHED] = True
        requests.append((request, member))
    return requests, unreadable


def refused_now(request: Request, checks: list[LeaseCheck]) -> bool:
    """Whether a part's lease check drops a leased request before the engine
    is given it (each check counts what it drops)."""
    return any(check(request) is not None for check in checks)


def dead_letter_unreadable(
    unreadable: list[Unreadable], dead_letter: Callable[..., None]
) -> list[bytes]:
    """Dead-letter queue entries that are not requests, with the reason and what
    they hold; their lease members, to release once the records are written."""
    for member, url, error, raw in unreadable:
        logger.error("dead-lettering an unreadable queue entry: %s", error)
        crawl = crawl_fields(split_group(text(member.partition(b"\n")[0]))[1])
        dead_letter(kind="unreadable", url=url, error=error, raw=raw, **crawl)
    return [entry.member for entry in unreadable]


def _url_of(data: bytes) -> str:
    """The URL of an unreadable queue entry, if one can be told, for the record."""
    try:
        url = json.loads(data).get("url")
    except (ValueError, AttributeError, RecursionError):
        return ""
    return url[:2000] if isinstance(url, str) else ""
