"""Documents as the crawl makes them: the settings read once per crawler, each
document counted (``documents/built``), each page that makes none counted with
its reason (``documents/skipped/REASON``), never an error out of a callback."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from extensions.documents.extract import NotADocument, build_document

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)


class Documents:
    def __init__(self, crawler: Crawler):
        settings = crawler.settings
        self.stats = crawler.stats
        self.enabled = settings.getbool("DOCUMENTS_ENABLED")
        self.main_content = settings.getbool("DOCUMENTS_MAIN_CONTENT")
        self.chunk_size = settings.getint("DOCUMENTS_CHUNK_SIZE")
        self.chunk_overlap = settings.getint("DOCUMENTS_CHUNK_OVERLAP")

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Documents:
        found = getattr(crawler, "_documents", None)
        if found is None:
            found = crawler._documents = cls(crawler)  # type: ignore[attr-defined]
        return found

    def of(self, response: Response) -> dict[str, Any] | None:
        """``response``'s document, or None (counted with the reason)."""
        try:
            document = build_document(response, main_content=self.main_content,
                                      chunk_size=self.chunk_size,
                                      chunk_overlap=self.chunk_overlap)  # fmt: skip
        except NotADocument as refused:
            self.stats.inc_value(f"documents/skipped/{refused.reason}")
            return None
        except Exception as exc:  # a page no extractor foresaw: the crawl goes on
            logger.warning("no document for %s: %s: %s", response.url, type(exc).__name__, exc)
            self.stats.inc_value("documents/skipped/error")
            return None
        self.stats.inc_value("documents/built")
        return document
