"""Scrapes answered from the crawl's WARC archive (``maxAge``): the newest
capture of a URL (``warc/captures.py``), when it is young enough and its page
was a success, read back from its file and made into the document a live
fetch would give, with ``cacheState: "hit"`` and ``cachedAt``. No request
reaches the site. A capture this machine cannot read (another node's own
directory, a file still in a spool) is a miss: the page is fetched live."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from scrapy.http import Headers, Request
from scrapy.responsetypes import responsetypes

from extensions.api.documents import firecrawl_document
from extensions.warc.archive import parse_date
from extensions.warc.captures import Archived, Capture, lookup, read_capture

if TYPE_CHECKING:
    from extensions.keys import SpiderKeys
    from extensions.warc.storage import LocalArchive, S3Archive

logger = logging.getLogger(__name__)


class ArchiveLookup:
    def __init__(self, server: Any, keys: SpiderKeys, archive: LocalArchive | S3Archive):
        self.server = server
        self.prefix = keys.named("warc_captures", bucket="")
        self.archive = archive

    def capture(self, url: str) -> Capture | None:
        """The newest capture of ``url`` the index has. Raises redis.RedisError."""
        return lookup(self.server, self.prefix, url)

    def read(self, capture: Capture) -> Archived | None:
        data = self.archive.read_range(capture.file, capture.offset, capture.length)
        return None if data is None else read_capture(data, capture)

    def age(self, capture: Capture) -> float | None:
        """Seconds since the capture, or None if its date does not parse."""
        try:
            return (datetime.now(UTC) - parse_date(capture.date)).total_seconds()
        except ValueError:
            return None

    def document(self, url: str, max_age: float, options: dict[str, Any]) -> dict[str, Any] | None:
        """The Firecrawl document of ``url``'s capture if one no older than
        ``max_age`` seconds holds a success, else None."""
        capture = self.capture(url)
        if capture is None or not 200 <= capture.status < 300:
            return None
        age = self.age(capture)
        if age is None or age > max_age:
            return None
        page = self.read(capture)
        if page is None:
            logger.info("the capture of %s in %s cannot be read here: fetched live",
                        url[:200], capture.file)  # fmt: skip
            return None
        headers = Headers(page.headers)
        cls = responsetypes.from_args(headers=headers, url=page.url, body=page.body)
        response = cls(url=page.url, status=page.status, headers=headers, body=page.body,
                       request=Request(page.url))  # fmt: skip
        document = firecrawl_document(response, options)
        document["metadata"].update(cacheState="hit", cachedAt=capture.date)
        return document
