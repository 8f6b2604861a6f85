"""The places where the node has to look inside Scrapy's engine.

Scrapy has no public signal for "this request's response, and everything its
callback produced, has been fully processed", nor a public way to make an idle
engine ask the scheduler again before its 5-second heartbeat. Both are needed:
the first to release a lease only once its work is durable, the second so an
idle node starts within a fraction of a second when work appears. Keeping both
accesses here means one file to check on a Scrapy upgrade, and ``seam_problem``
checks them when a node starts: a Scrapy that renamed them is refused with one
line, instead of a crawl whose leases are never released.

Whether the engine is closing its spider (``is_closing``) tells a timer that
reads start URLs to stop handing the engine requests. A third,
``take_output_handling``, lets ``extensions/outputs.py`` process a callback's
output without Scrapy's per-response worker tasks; where Scrapy's
scraper is not as it expects, ``output_seam_problem`` says why and the node
keeps Scrapy's own handling.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine
    from typing import Any

    from scrapy import Request
    from scrapy.crawler import Crawler


def seam_problem() -> str | None:
    """What of Scrapy's engine internals this module needs is missing, or None."""
    import scrapy
    from scrapy.core import engine as scrapy_engine

    engine_cls = getattr(scrapy_engine, "ExecutionEngine", None)
    slot_cls = getattr(scrapy_engine, "_Slot", None)
    missing = []
    # Instance attributes show up among the names their __init__ uses.
    if engine_cls is None or "_slot" not in engine_cls.__init__.__code__.co_names:
        missing.append("ExecutionEngine._slot")
    for attribute in ("inprogress", "nextcall", "closing"):
        if slot_cls is None or attribute not in slot_cls.__init__.__code__.co_names:
            missing.append(f"_Slot.{attribute}")
    # the downloader's send gate (extensions/downloader.py) overrides this one
    from scrapy.core.downloader import Downloader

    download = getattr(Downloader, "_download", None)
    if download is None or download.__code__.co_varnames[:3] != ("self", "slot", "request"):
        missing.append("Downloader._download(slot, request)")
    if not missing:
        return None
    return (
        f"Scrapy {scrapy.__version__} has no {', '.join(missing)}, which the distributed "
        "scheduler (when a request is done) and downloader (holds met at send time) need; "
        "use the Scrapy version pinned in requirements.txt"
    )


def requests_in_progress(crawler: Crawler) -> set[Request] | None:
    """Requests the engine took from the scheduler and has not finished with
    (downloaded, called back, items through the pipelines); None if unknown."""
    slot = getattr(crawler.engine, "_slot", None)
    return getattr(slot, "inprogress", None)


def is_closing(crawler: Crawler) -> bool:
    """Whether the engine has no spider open or is closing it (its scheduler may
    be closed already: nothing new should go in)."""
    slot = getattr(crawler.engine, "_slot", None)
    return slot is None or getattr(slot, "closing", None) is not None


def wake(crawler: Crawler) -> None:
    """Make the engine ask the scheduler for requests on its next turn."""
    slot = getattr(crawler.engine, "_slot", None)
    nextcall = getattr(slot, "nextcall", None)
    if nextcall is not None:
        nextcall.schedule()


def output_seam_problem(crawler: Crawler) -> str | None:
    """Why the engine's scraper cannot take ``take_output_handling``, or None."""
    from scrapy.core.scraper import Scraper
    from scrapy.utils.asyncio import is_asyncio_available

    scraper = getattr(crawler.engine, "scraper", None)
    if type(scraper) is not Scraper:
        return f"the engine's scraper is {type(scraper).__name__}, not Scrapy's own"
    if not is_asyncio_available():
        return "the reactor is not asyncio's"
    handle = getattr(Scraper, "handle_spider_output_async", None)
    names = ("self", "result", "request", "response")
    if handle is None or handle.__code__.co_varnames[:4] != names:
        return "Scrapy's Scraper has no handle_spider_output_async(result, request, response)"
    for name in ("_process_spidermw_output_async", "handle_spider_error"):
        if not callable(getattr(Scraper, name, None)):
            return f"Scrapy's Scraper has no {name}"
    return None


def take_output_handling(
    crawler: Crawler, handler: Callable[[Any, Request, Any], Coroutine[Any, Any, None]]
) -> None:
    """Make the engine's scraper call ``handler(result, request, response)`` for
    each callback's output (once ``output_seam_problem`` said None)."""
    crawler.engine.scraper.handle_spider_output_async = handler  # type: ignore[method-assign,assignment]


def output_processor(scraper: Any) -> Callable[[Any, Any], Coroutine[Any, Any, None]]:
    """What Scrapy runs for each output: schedules a request, sends an item
    through the pipelines."""
    return scraper._process_spidermw_output_async
