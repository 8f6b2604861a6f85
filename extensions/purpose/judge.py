"""Each page against its crawl's purpose, on the node: the purpose (the
setting, or its crawl id's, read from Redis once a minute at most), whether the
URL's preferences refuse it, and what was refused, counted for the frontier
part to write with the flush that releases the pages (``part.py``)."""

from __future__ import annotations

import collections
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import redis
from scrapy.utils.httpobj import urlparse_cached

from extensions import connection
from extensions.keys import SpiderKeys
from extensions.meta import CRAWL_ID
from extensions.purpose.policy import NO_PURPOSE, PURPOSES, refusal
from extensions.runtime import state_of

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)

#: seconds a crawl id's purpose is taken as read
PURPOSE_TTL = 60.0
#: crawl ids whose purpose a node keeps (a crawl past them is read again each time)
PURPOSES_KEPT = 1000
#: the field a flagged item carries
REFUSED = "_usage_refused"


@dataclass
class Refused:
    """What this node refused since its last flush (the part takes it)."""

    hosts: collections.Counter[str] = field(default_factory=collections.Counter)
    purposes: collections.Counter[str] = field(default_factory=collections.Counter)
    items_dropped: int = 0

    def __bool__(self) -> bool:
        return bool(self.hosts or self.items_dropped)


def refused_of(crawler: Crawler) -> Refused:
    return state_of(crawler, Refused, Refused)


class PurposeJudge:
    def __init__(self, crawler: Crawler):
        settings = crawler.settings
        self.crawler = crawler
        self.stats = crawler.stats
        self.default = settings.get("CRAWL_PURPOSE") or ""
        self.enforce = settings.get("USAGE_ENFORCE")
        self.refused = refused_of(crawler)
        self._by_crawl: dict[str, tuple[str, float]] = {}

    def purpose_of(self, response: Response) -> str:
        crawl = response.meta.get(CRAWL_ID)
        if not crawl or not isinstance(crawl, str):
            return self.default
        now = time.monotonic()
        known = self._by_crawl.get(crawl)
        if known is not None and known[1] > now:
            return known[0]
        purpose = self.default
        try:
            keys = SpiderKeys.for_crawler(self.crawler)
            raw = connection.client_for(self.crawler).hget(keys.crawl(crawl), "purpose")
        except redis.RedisError as exc:  # the setting's, until Redis answers
            connection.health_for(self.crawler).failed(exc)
            return purpose
        value = connection.text(raw) if raw is not None else ""
        if value == NO_PURPOSE:
            purpose = ""
        elif value in PURPOSES:
            purpose = value
        elif value:
            self.stats.inc_value("usage/unknown_purpose")
        if len(self._by_crawl) >= PURPOSES_KEPT:
            self._by_crawl.clear()
        self._by_crawl[crawl] = (purpose, now + PURPOSE_TTL)
        return purpose

    def judge(self, response: Response, usage: dict[str, str]) -> str | None:
        """The refusal of the page's purpose (``train-ai=n``), counted; None when
        it has none or nothing refuses it."""
        if not usage:  # a site that says nothing refuses nothing
            return None
        purpose = self.purpose_of(response)
        found = refusal(usage, purpose) if purpose else None
        if found is None:
            return None
        self.refused.hosts[urlparse_cached(response).hostname or ""] += 1
        self.refused.purposes[purpose] += 1
        self.stats.inc_value("usage/refused_pages")
        self.stats.inc_value(f"usage/refused_pages/{purpose}")
        return found

    def dropped(self, count: int = 1) -> None:
        self.refused.items_dropped += count
        self.stats.inc_value("usage/items_dropped", count)
