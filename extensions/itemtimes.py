"""When an item's page was fetched, for the item store.

A crawl's items are stored as their pages are fetched: ``_fetched_at`` is the
moment the item store takes them. A reparse (``scrapy reparse``) makes items
from archived fetches, days or months old: each then keeps its archived
response's fetch time as ``_fetched_at`` and says when it was made, as
``_reparsed_at``. A dict item takes the fields at once; an item of a class
without them is noted beside it until the item store takes it.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from extensions.runtime import peek_state, state_of
from extensions.spidermiddlewares.crawlid import ItemCrawls

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

FETCHED_AT = "_fetched_at"
REPARSED_AT = "_reparsed_at"


#: the key of the notes beside items (ItemCrawls is the crawl id's too)
NOTES = "item_times"


def _notes(crawler: Crawler) -> ItemCrawls:
    return state_of(crawler, NOTES, ItemCrawls)


def stamp_reparsed(crawler: Crawler, item: Any, fetched: dt.datetime | None) -> None:
    """Note that ``item`` was made now from a fetch archived at ``fetched``."""
    times = {REPARSED_AT: dt.datetime.now(dt.UTC)}
    if fetched is not None:
        times[FETCHED_AT] = fetched
    if isinstance(item, dict):
        item.update(times)
    else:
        _notes(crawler).put(item, times)


def times_of(crawler: Crawler, item: Any) -> dict[str, dt.datetime]:
    """What ``stamp_reparsed`` noted beside ``item`` (taken), else nothing."""
    if isinstance(item, dict) or peek_state(crawler, NOTES) is None:
        return {}
    return _notes(crawler).pop(item) or {}
