"""Between the recrawl middleware and the scheduler: a fetched page's revisit
record, waiting to be written with the release of the page's lease, and what
becomes of a kept page whose fetch failed for good. The scheduler reads them
here; the middleware (a layer above) fills them in."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

#: (request fingerprint in hex, group, due time, the request's JSON)
RevisitEntry = tuple[str, str, float, bytes]

FailureHook = Callable[["Request"], "RevisitEntry | None"]
_failure_hooks: weakref.WeakKeyDictionary[Crawler, FailureHook] = weakref.WeakKeyDictionary()


def on_failure(crawler: Crawler, hook: FailureHook) -> None:
    """Who says what becomes of a kept page of this crawler's whose fetch failed."""
    _failure_hooks[crawler] = hook


def after_failure(crawler: Crawler, request: Request) -> RevisitEntry | None:
    """The revisit record of a kept page whose fetch failed for good, if any
    (the recrawl middleware's answer; None without it)."""
    hook = _failure_hooks.get(crawler)
    return hook(request) if hook is not None else None


# A fetched page's revisit record, for the scheduler to write with the release of
# the page's lease: node-local, by request, so a spider that copies response.meta
# into the requests it makes does not copy it along. Where the record waits for
# the page's items, a function that completes it.
pending_revisits: weakref.WeakKeyDictionary[
    Request, RevisitEntry | Callable[[], RevisitEntry | None]
] = weakref.WeakKeyDictionary()
# The items' digest of a page whose fingerprint is its items', while they come.
items_digest: weakref.WeakKeyDictionary[Request, Any] = weakref.WeakKeyDictionary()


def ignored_fields(crawler: Crawler) -> frozenset[str]:
    """Item fields that are not content (the spider's own fetch time, say): a
    change in them is no change. The spider's ``recrawl_ignore_fields``, else
    ``RECRAWL_IGNORE_FIELDS``."""
    fields = getattr(crawler.spidercls, "recrawl_ignore_fields", None)
    if fields is None:
        fields = crawler.settings.getlist("RECRAWL_IGNORE_FIELDS")
    return frozenset([fields] if isinstance(fields, str) else fields)
