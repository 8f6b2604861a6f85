"""``DOCUMENTS_PREFER_MARKDOWN``: requests ask for markdown first, as agents do
(``Accept: text/markdown``); a site that serves it answers with the page's
own markdown, a site that does not answers HTML as before. A request whose
``Accept`` the project or the spider set is left alone."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.exceptions import NotConfigured
from scrapy.settings.default_settings import DEFAULT_REQUEST_HEADERS

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler

PREFER_MARKDOWN = b"text/markdown, text/html;q=0.9, application/xhtml+xml;q=0.9, */*;q=0.8"


class PreferMarkdown:
    def __init__(self, default_accept: bytes):
        self.default_accept = default_accept

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> PreferMarkdown:
        settings = crawler.settings
        if not settings.getbool("DOCUMENTS_PREFER_MARKDOWN"):
            raise NotConfigured
        headers = settings.getdict("DEFAULT_REQUEST_HEADERS") or DEFAULT_REQUEST_HEADERS
        accept = next((v for k, v in headers.items() if k.lower() == "accept"), "")
        return cls(accept.encode() if isinstance(accept, str) else bytes(accept))

    def process_request(self, request: Request, spider: Spider | None = None) -> None:
        # (after Scrapy's DefaultHeadersMiddleware: only its default is replaced)
        accept = request.headers.get(b"Accept")
        if accept is None or accept == self.default_accept:
            request.headers[b"Accept"] = PREFER_MARKDOWN
