"""``rel="canonical"``: the URL a page says it is (RFC 6596), from a ``<link
rel="canonical">`` in its head or a ``Link: <URL>; rel="canonical"`` header.

A page whose canonical is another URL of its site records it on its items
(``canonical``) and has that URL marked seen for the crawl, as if it had been
queued, so links to it are not fetched again: the page fetched is its copy.
The canonical goes through the normalizer chain first, and is never fetched
because of this, so a chain of canonicals costs nothing and ends at once. A
canonical that is malformed, not http(s), or on another registered domain
(a site cannot speak for another) is ignored and counted.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

from scrapy import Request
from scrapy.http import HtmlResponse

from extensions.frontier.domains import registered_domain
from extensions.installed import require_addon, switched_off
from extensions.meta import CRAWL_ID, SEEN_ONLY
from extensions.spidermiddlewares.marking import ItemMarker
from extensions.urlnorm.chain import normalizing_for

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)

CANONICAL = "canonical"  # the field an item carries
URL_MAX = 2000
LINK_HEADER = re.compile(r"<([^>]*)>\s*((?:;\s*[^;,]*)*)")
REL_CANONICAL = re.compile(
    r"""(?:^|;)\s*rel\s*=\s*"?(?:[^";,]*\s)?canonical(?:\s[^";,]*)?"?""", re.I
)


def header_canonical(response: Response) -> str | None:
    """The canonical a ``Link`` header names, if any."""
    for raw in response.headers.getlist("Link"):
        value = raw.decode("latin-1")
        for match in LINK_HEADER.finditer(value):
            if REL_CANONICAL.search(match.group(2)):
                return match.group(1).strip()
    return None


def html_canonical(response: Response) -> str | None:
    if not isinstance(response, HtmlResponse):
        return None
    # /html/head, not //head: lxml puts a document's head there (a <link> written in
    # the body too), and // walks the whole page (150 us a page of Python's docs, not 30)
    href = response.xpath("/html/head/link[@href][contains(concat(' ', translate(@rel, "
                          "'CANONIL', 'canonil'), ' '), ' canonical ')]/@href").get()  # fmt: skip
    return href.strip() if href is not None else None


class CanonicalMiddleware:
    def __init__(self, crawler: Crawler):
        self.stats = crawler.stats
        self.normalize = normalizing_for(crawler)
        self.marker = ItemMarker(self.stats, "canonical/unmarkable", logger)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> CanonicalMiddleware:
        require_addon(crawler.settings, cls.__name__)
        if not crawler.settings.getbool("CANONICAL_ENABLED"):
            raise switched_off(cls, "CANONICAL_ENABLED is False")
        return cls(crawler)

    def canonical_of(self, response: Response) -> str | None:
        """The other URL this page says it is, or None (none, itself, or one
        it may not name: counted)."""
        if response.status != 200:
            return None
        raw = header_canonical(response) or html_canonical(response)
        if not raw:
            return None
        try:
            url = urljoin(response.url, raw)
            parts = urlsplit(url)
            host = parts.hostname or ""
            if parts.scheme not in ("http", "https") or not host or len(url) > URL_MAX:
                raise ValueError(url)
        except ValueError:
            self.stats.inc_value("canonical/malformed")
            return None
        if self.normalize is not None:
            url = self.normalize(url)
        page = self.normalize(response.url) if self.normalize is not None else response.url
        if url == page:
            self.stats.inc_value("canonical/self")
            return None
        if registered_domain(host) != registered_domain(urlsplit(response.url).hostname or ""):
            self.stats.inc_value("canonical/other_site")
            return None
        self.stats.inc_value("canonical/other")
        return url

    def _marked(self, output: Any, canonical: str) -> Any:
        return self.marker.mark(output, CANONICAL, canonical)

    def _seen(self, response: Response, canonical: str) -> Request:
        """The canonical, to be marked seen for the crawl and never fetched."""
        meta: dict[str, Any] = {SEEN_ONLY: True}
        crawl = response.meta.get(CRAWL_ID)
        if crawl:  # made after the crawl id middleware gave the page's links theirs
            meta[CRAWL_ID] = crawl
        return Request(canonical, meta=meta)

    def process_spider_output(
        self, response: Response, result: Iterable[Any], spider: Any = None
    ) -> Iterator[Any]:
        canonical = self.canonical_of(response)
        if canonical is not None:
            yield self._seen(response, canonical)
        for output in result:
            yield self._marked(output, canonical) if canonical is not None else output

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any], spider: Any = None
    ) -> AsyncIterator[Any]:
        canonical = self.canonical_of(response)
        if canonical is not None:
            yield self._seen(response, canonical)
        async for output in result:
            yield self._marked(output, canonical) if canonical is not None else output
