"""Each request as the scheduler handed it out, before the downloader's
middlewares added their headers and meta (user agent, Accept, client hints,
proxy, timeouts).

What is stored for a later fetch (a retry waiting in Redis, a dead letter, a
page kept for a recrawl) is the request as leased: the later fetch adds its
own, so one fetch's identity is never pinned to the next.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scrapy import Request

# node-local, by request object: the header names and meta keys it was leased with
as_leased: weakref.WeakKeyDictionary[Request, tuple[frozenset[bytes], frozenset[str]]] = (
    weakref.WeakKeyDictionary()
)


def remember_as_leased(request: Request) -> None:
    as_leased[request] = (frozenset(request.headers), frozenset(request.meta))


def drop_downloader_headers(leased: Request, request: Request) -> None:
    """Take from ``request`` (``leased`` itself or a copy of it) the headers the
    downloader's middlewares added to ``leased`` after it was leased; nothing
    when ``leased`` did not come from the scheduler."""
    names = as_leased.get(leased)
    if names is None:
        return
    for name in [name for name in request.headers if name not in names[0]]:
        del request.headers[name]


def drop_downloader_meta(leased: Request, request: Request) -> None:
    """Take from ``request`` (a copy of ``leased``) the meta keys the downloader's
    middlewares added to ``leased`` after it was leased (its proxy, download slot,
    ban marks), so the next fetch chooses them afresh; nothing when ``leased``
    did not come from the scheduler."""
    names = as_leased.get(leased)
    if names is None:
        return
    for key in [key for key in request.meta if key not in names[1]]:
        del request.meta[key]
