"""Drop a link the node already sent, where the callback yields it.

Most requests a page yields were met before. A spider that builds them itself
(``response.follow``, ``Request``) had each one go through every spider
middleware (Scrapy's referer, depth, URL length and offsite ones, the trap
checks, ...), two engine signals and the scheduler before the node's memory of
what it sent dropped it: on Python's documentation, 158 links a page, that was a
third of the node's CPU. ``SentLinksMiddleware`` sits next to the spider, just
after the crawl id is stamped, and drops such a request there: a GET without a
body whose URL, as written, this node sent to the frontier for the same crawl
(``SentFingerprints.has_request``: Scrapy's or scrapy-redis's fingerprint only).
It is counted as the scheduler counts it (``dupefilter/filtered``,
``dupefilter/filtered_locally``). The link path (``follow_links``) skips the same
links before building them.

What is the same: everything that reaches the frontier; such a request would be
dropped there. What differs: the middlewares further out, and the engine's
``request_scheduled`` and ``request_dropped`` signals, no longer see these
requests, so counts kept per link see fewer (``MAX_LINKS_PER_PAGE`` counts the
links that may still be new; ``robots/links_dropped``; Scrapy's depth stats).
With host ranks on, a link to another host goes on: the link graph counts it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from scrapy import Request

from extensions.frontier.sent import SentFingerprints, sent_for
from extensions.installed import require_addon, switched_off
from extensions.spidermiddlewares.linkgraph import ranks_used

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response


class SentLinksMiddleware:
    def __init__(self, crawler: Crawler, sent: SentFingerprints, other_hosts_known: bool):
        self.stats = crawler.stats
        self.sent = sent
        #: False with host ranks on: a link leaving the page's host always goes on
        self.other_hosts_known = other_hosts_known

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SentLinksMiddleware:
        require_addon(crawler.settings, cls.__name__)
        if crawler.settings.getint("DUPEFILTER_LOCAL_CACHE") <= 0:
            raise switched_off(cls, "DUPEFILTER_LOCAL_CACHE is 0: no memory of what the node sent")
        return cls(crawler, sent_for(crawler), not ranks_used(crawler.settings))

    def _known(self, response: Response) -> Any:
        """The check each output of ``response``'s callback goes through: True
        drops it. Built once a response."""
        has_request = self.sent.has_request
        if self.other_hosts_known:
            return lambda output: isinstance(output, Request) and has_request(output)
        parts = urlsplit(response.url)
        origin = f"{parts.scheme}://{parts.netloc}/"
        return lambda output: (
            isinstance(output, Request) and output.url.startswith(origin) and has_request(output)
        )

    def _count(self, dropped: int) -> None:
        if dropped:  # once a response: a stats call costs more than the check
            self.stats.inc_value("dupefilter/filtered", dropped)
            self.stats.inc_value("dupefilter/filtered_locally", dropped)

    def process_spider_output(
        self, response: Response, result: Iterable[Any], spider: Any = None
    ) -> Iterator[Any]:
        known, dropped = self._known(response), 0
        try:
            for output in result:
                if known(output):
                    dropped += 1
                else:
                    yield output
        finally:
            self._count(dropped)

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any], spider: Any = None
    ) -> AsyncIterator[Any]:
        known, dropped = self._known(response), 0
        try:
            async for output in result:
                if known(output):
                    dropped += 1
                else:
                    yield output
        finally:
            self._count(dropped)
