"""The two places where the frontier has to look inside Scrapy's engine.

Scrapy has no public signal for "this request's response, and everything its
callback produced, has been fully processed", nor a public way to make an idle
engine ask the scheduler again before its 5-second heartbeat. Both are needed:
the first to release a lease only once its work is durable, the second so an
idle node starts within a fraction of a second when work appears. Keeping both
accesses here means one file to check on a Scrapy upgrade.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler


def requests_in_progress(crawler: Crawler) -> set[Request] | None:
    """Requests the engine took from the scheduler and has not finished with
    (downloaded, called back, items through the pipelines); None if unknown."""
    slot = getattr(crawler.engine, "_slot", None)
    return getattr(slot, "inprogress", None)


def wake(crawler: Crawler) -> None:
    """Make the engine ask the scheduler for requests on its next turn."""
    slot = getattr(crawler.engine, "_slot", None)
    nextcall = getattr(slot, "nextcall", None)
    if nextcall is not None:
        nextcall.schedule()
