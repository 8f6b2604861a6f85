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

    def parse(self, response):
        if not isinstance(response, HtmlResponse):
            return
        yield {"url": response.url, "title": (response.css("title::text").get() or "").strip()}
        yield from self.follow_links(response)
