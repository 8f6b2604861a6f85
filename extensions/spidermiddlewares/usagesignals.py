"""Each item carries what its site says its page may be used for (``_usage``):
the ``Content-Signal`` / ``Content-Usage`` preferences its host's robots.txt
states for that URL (``extensions/usage.py``; read when robots.txt is, here or
from the cluster's copy) and those of the page's own headers, combined so that a
refusal wins. An item of a site that says nothing has no ``_usage``.
``USAGE_SIGNALS_ENABLED = False`` turns it off.

With a purpose (``CRAWL_PURPOSE``, or the crawl id's: ``extensions/purpose/``),
the items of a page whose preferences refuse it are dropped, or kept with
``_usage_refused`` (``USAGE_ENFORCE = "flag"``); its links are followed either
way, as the preferences speak of the content's use, not of crawling."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from scrapy import Request
from scrapy.utils.httpobj import urlparse_cached

from extensions.installed import require_addon, switched_off
from extensions.purpose.judge import REFUSED, PurposeJudge
from extensions.robotscache import robots_state
from extensions.settingchecks import flag
from extensions.spidermiddlewares.marking import ItemMarker
from extensions.usage import Problems, header_usage, refusal_wins

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)

SETTING_CHECKS = {"USAGE_SIGNALS_ENABLED": flag}
USAGE = "_usage"  # the field an item carries


class UsageSignalsMiddleware:
    def __init__(self, crawler: Crawler):
        self.stats = crawler.stats
        self.by_host = robots_state(crawler).usage
        self.marker = ItemMarker(self.stats, "usage/unmarkable", logger)
        self.judge = PurposeJudge(crawler)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> UsageSignalsMiddleware:
        require_addon(crawler.settings, cls.__name__)
        if not crawler.settings.getbool("USAGE_SIGNALS_ENABLED"):
            raise switched_off(cls, "USAGE_SIGNALS_ENABLED is False")
        return cls(crawler)

    def usage_of(self, response: Response) -> dict[str, str]:
        """What ``response``'s site says of its URL, and the page itself."""
        url = urlparse_cached(response)
        robots = self.by_host.get(url.netloc)
        path = (url.path or "/") + (f"?{url.query}" if url.query else "")
        problems = Problems()
        found = refusal_wins(
            robots.for_path(path) if robots else {},
            header_usage(response.headers.getlist("Content-Signal")),
            header_usage(response.headers.getlist("Content-Usage"), True, problems),
        )
        if problems.unparsed:
            self.stats.inc_value("usage/unparsed", problems.unparsed)
        if problems.unknown:
            self.stats.inc_value("usage/unknown_labels", problems.unknown)
        return found

    def _outputs(self, response: Response) -> Any:
        """A function from one output of the page's callback to what goes on
        (None: an item left out)."""
        usage = self.usage_of(response)
        refusal = self.judge.judge(response, usage)
        if refusal is None:
            if not usage:
                return lambda output: output
            return lambda output: self.marker.mark(output, USAGE, dict(usage), "usage/items_marked")
        drop = self.judge.enforce == "drop"

        def refused(output: Any) -> Any:
            if isinstance(output, Request):
                return output
            if drop:
                self.judge.dropped()
                return None
            output = self.marker.mark(output, USAGE, dict(usage), "usage/items_marked")
            return self.marker.mark(output, REFUSED, refusal, "usage/items_flagged")

        return refused

    def process_spider_output(
        self, response: Response, result: Iterable[Any], spider: Any = None
    ) -> Iterator[Any]:
        outputs = self._outputs(response)
        for output in result:
            output = outputs(output)
            if output is not None:
                yield output

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any], spider: Any = None
    ) -> AsyncIterator[Any]:
        outputs = self._outputs(response)
        async for output in result:
            output = outputs(output)
            if output is not None:
                yield output
