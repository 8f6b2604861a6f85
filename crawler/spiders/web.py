"""``web``: a broad crawl. Follows every link of every HTML page it fetches, to
any host (every ``<a href>`` and ``<area href>`` Scrapy's ``LinkExtractor`` takes:
http(s), no documents or media by extension), through the link path
(``follow_links``: links this node sent already cost next to nothing), and stores
one item per page (``url``, ``title``). Pair it with
politeness and with ``FRONTIER_ORDER = "importance"`` (docs/importance.md), and a
stop: ``CLOSESPIDER_PAGECOUNT``, ``DEPTH_LIMIT`` or ``HOST_BUDGET_BY_RANK``.
"""

from __future__ import annotations

from scrapy.http import HtmlResponse

from extensions.spiders import DistributedSpider


class WebSpider(DistributedSpider):
    name = "web"
    documents = False  # DOCUMENTS_ENABLED: each page stored with its document

    def parse(self, response):
        if not isinstance(response, HtmlResponse):
            return
        page = {"url": response.url, "title": (response.css("title::text").get() or "").strip()}
        # DOCUMENTS_ENABLED: the page with its document (its reason counted if none)
        document = self.document(response) if self.documents else None
        yield {**page, **document} if document else page
        yield from self.follow_links(response)

    def setup_redis(self, crawler):
        super().setup_redis(crawler)
        self.documents = crawler.settings.getbool("DOCUMENTS_ENABLED")
