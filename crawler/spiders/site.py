"""``site``: a generic crawler for any start URLs pushed to ``site:start_urls``.

Follows links within the host of the start URL it descends from (the host
travels in ``meta["root_host"]``, so any node can carry on from any page),
obeys robots.txt, and stores one item per HTML page fetched. Its links take the
link path (``DistributedSpider.new_links``): those this node sent already cost a
dictionary lookup, not a request. Sitemaps pushed
with ``scrapy seed site --sitemap URL`` (and, with ``SITEMAP_FROM_ROBOTS``, those
robots.txt names) are read too: their pages go to ``parse`` like any other.

``-a allow=REGEX`` follows only links whose URL matches one of the
comma-separated regular expressions. At most ``MAX_LINKS_PER_PAGE`` links of a
page are looked at: a page with a million links costs no more than one with
the limit. With a ``FRONTIER_SCORER``, each link carries its anchor text
(``meta["link_text"]``, as CrawlSpider's rules do) for the scorer to read.
"""

from __future__ import annotations

import re
from dataclasses import asdict
from datetime import UTC, datetime
from urllib.parse import urlsplit

from scrapy.http import HtmlResponse
from scrapy.link import Link
from scrapy.linkextractors import IGNORED_EXTENSIONS, LinkExtractor

from crawler.items import PageItem
from extensions.spidermiddlewares.linklimit import LinkLimitMiddleware, page_over_limit
from extensions.spiders import DistributedSpider

DOCUMENT_EXTENSIONS = ("pdf", "docx")
MARKDOWN_LINK = re.compile(r"\[([^\]\n]{0,200})\]\(\s*([^)\s]{1,2000})(?:\s+\"[^\"]*\")?\s*\)")


def is_markdown(response) -> bool:
    kind = (response.headers.get(b"Content-Type") or b"").split(b";")[0].strip().lower()
    return kind == b"text/markdown" and hasattr(response, "text")


class SiteSpider(DistributedSpider):
    name = "site"
    link_limit = 0
    keep_link_text = False  # for a scorer: links carry their anchor text
    documents = False  # DOCUMENTS_ENABLED: each page stored with its document
    recrawl_ignore_fields = ("fetched_at",)  # set by the spider: no change

    def __init__(self, *args, allow: str = "", **kwargs):
        super().__init__(*args, **kwargs)
        self.allow = [p for p in allow.split(",") if p]
        self.link_extractor = LinkExtractor(allow=self.allow)

    def setup_redis(self, crawler):
        super().setup_redis(crawler)
        self.keep_link_text = bool(crawler.settings.get("FRONTIER_SCORER"))
        self.documents = crawler.settings.getbool("DOCUMENTS_ENABLED")
        # documents: links to PDF and DOCX files are followed too (Scrapy skips them)
        deny = [e for e in IGNORED_EXTENSIONS if e not in DOCUMENT_EXTENSIONS]
        options = {"deny_extensions": deny} if self.documents else {}
        self.link_extractor = LinkExtractor(allow=self.allow, **options)
        limit = self.link_limit = LinkLimitMiddleware.limit_for(crawler)
        if limit > 0:
            # Extraction itself is what costs on a huge page: look at the first links only.
            first = f"(//a|//area)[position() <= {limit}]"
            self.link_extractor = LinkExtractor(allow=self.allow, restrict_xpaths=first, **options)

    def make_request_from_data(self, data: bytes):
        request = super().make_request_from_data(data)
        request.meta.setdefault("root_host", urlsplit(request.url).hostname)
        return request

    def parse(self, response):
        if not isinstance(response, HtmlResponse):
            if self.documents and is_markdown(response):  # DOCUMENTS_PREFER_MARKDOWN
                yield from self.parse_markdown(response)
            elif self.documents:  # a PDF or a DOCX; another type is counted, not stored
                yield from self.parse_markdown(response, links=False)
            return
        referer = response.request.headers.get("Referer") if response.request else None
        page = PageItem(
            url=response.url,
            status=response.status,
            title=(response.css("title::text").get() or "").strip() or None,
            fetched_at=datetime.now(UTC).isoformat(),
            depth=response.meta.get("depth", 0),
            referer=referer.decode("latin-1") if referer else None,
        )
        # DOCUMENTS_ENABLED: the page with its document (a page that makes none
        # is stored as a page, its reason counted)
        document = self.document(response) if self.documents else None
        yield {**asdict(page), **document} if document else page
        if self.link_limit > 0:
            anchors = int(float(response.xpath("count(//a|//area)").get()))
            if anchors > self.link_limit:
                page_over_limit(
                    self.crawler.stats, response.url, self.link_limit, anchors - self.link_limit
                )
        yield from self.follow_within_host(response, self.new_links(response, self.link_extractor))

    def parse_markdown(self, response, links: bool = True):
        """A page its site served as markdown: its document, and the links it has
        (``[text](url)``, the first MAX_LINKS_PER_PAGE) followed as a page's are
        (a PDF's or a DOCX's document: ``links=False``)."""
        document = self.document(response)
        if document:
            referer = response.request.headers.get("Referer") if response.request else None
            yield {"status": response.status, "fetched_at": datetime.now(UTC).isoformat(),
                   "depth": response.meta.get("depth", 0),
                   "referer": referer.decode("latin-1") if referer else None,
                   **document}  # fmt: skip
        if not links:
            return
        hrefs = MARKDOWN_LINK.findall(response.text[:5_000_000])[: self.link_limit or None]
        urls = [(response.urljoin(href), text) for text, href in hrefs]
        links = [Link(url, text) for url, text in urls if url.startswith(("http://", "https://"))]
        if self.allow:
            links = [link for link in links if any(re.search(p, link.url) for p in self.allow)]
        yield from self.follow_within_host(response, links)

    def follow_within_host(self, response, links):
        root_host = response.meta.get("root_host") or urlsplit(response.url).hostname
        for link in links:
            if urlsplit(link.url).hostname == root_host:
                meta = {"root_host": root_host}
                if self.keep_link_text:
                    meta["link_text"] = link.text[:200]
                yield response.follow(link, meta=meta)
