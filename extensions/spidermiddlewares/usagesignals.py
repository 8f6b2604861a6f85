"""Each item carries what its site says its page may be used for (``_usage``):
the ``Content-Signal`` / ``Content-Usage`` preferences its host's robots.txt
states for that URL (``extensions/usage.py``; read when robots.txt is, here or
from the cluster's copy) and those of the page's own headers, combined so that a
refusal wins. An item of a site that says nothing has no ``_usage``.
``USAGE_SIGNALS_ENABLED = False`` turns it off."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from scrapy.utils.httpobj import urlparse_cached

from extensions.installed import require_addon, switched_off
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

    def _marked(self, output: Any, usage: dict[str, str]) -> Any:
        return self.marker.mark(output, USAGE, dict(usage), "usage/items_marked")

    def process_spider_output(
        self, response: Response, result: Iterable[Any], spider: Any = None
    ) -> Iterator[Any]:
        usage = self.usage_of(response)
        for output in result:
            yield self._marked(output, usage) if usage else output

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any], spider: Any = None
    ) -> AsyncIterator[Any]:
        usage = self.usage_of(response)
        async for output in result:
            yield self._marked(output, usage) if usage else output
