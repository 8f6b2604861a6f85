"""Between the recrawl middleware and the scheduler: a fetched page's revisit
record, waiting to be written with the release of the page's lease, and what
becomes of a kept page whose fetch failed for good. The scheduler reads them
here; the middleware (a layer above) fills them in."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from extensions.runtime import state_of

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

#: (request fingerprint in hex, group, due time, the request's JSON)
RevisitEntry = tuple[str, str, float, bytes]

FailureHook = Callable[["Request"], "RevisitEntry | None"]


class Revisits:
    """One crawler's revisit records on their way to the scheduler."""

    def __init__(self) -> None:
        #: a fetched page's record, for the scheduler to write with the release of
        #: the page's lease: node-local, by request, so a spider that copies
        #: response.meta into the requests it makes does not copy it along; where
        #: the record waits for the page's items, a function that completes it
        self.pending: weakref.WeakKeyDictionary[
            Request, RevisitEntry | Callable[[], RevisitEntry | None]
        ] = weakref.WeakKeyDictionary()
        #: the items' digest of a page whose fingerprint is its items', while they come
        self.items_digest: weakref.WeakKeyDictionary[Request, Any] = weakref.WeakKeyDictionary()
        #: who says what becomes of a kept page whose fetch failed (the middleware)
        self.failure_hook: FailureHook | None = None

    def after_failure(self, request: Request) -> RevisitEntry | None:
        """The revisit record of a kept page whose fetch failed for good, if any
        (the recrawl middleware's answer; None without it)."""
        return self.failure_hook(request) if self.failure_hook is not None else None


def revisits_for(crawler: Crawler) -> Revisits:
    return state_of(crawler, Revisits, Revisits)


def ignored_fields(crawler: Crawler) -> frozenset[str]:
    """Item fields that are not content (the spider's own fetch time, say): a
    change in them is no change. The spider's ``recrawl_ignore_fields``, else
    ``RECRAWL_IGNORE_FIELDS``."""
    fields = getattr(crawler.spidercls, "recrawl_ignore_fields", None)
    if fields is None:
        fields = crawler.settings.getlist("RECRAWL_IGNORE_FIELDS")
    return frozenset([fields] if isinstance(fields, str) else fields)
