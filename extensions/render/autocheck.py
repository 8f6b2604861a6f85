"""After a plain fetch that RENDER_AUTO checks: is the page's content there?

The spider says how to tell: its ``needs_render(response)`` method (true: the
content is missing), else a CSS selector that must match
(RENDER_AUTO_SELECTOR, or the spider's ``render_auto_selector``). A page whose
content is missing is not given to the callback: it is queued again for a
browser, and its URL pattern is learned for the cluster. A page learned as
needing a browser that comes back whole in a re-check unlearns its pattern.

The middleware also sends a render request that reached a node that cannot
render (a queue entry another writer put in a plain lane) to the render lane.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy.http import HtmlResponse

from extensions.meta import RENDER, RENDER_CHECK
from extensions.render.policy import LearnedRender, learned_for, url_pattern
from extensions.render.setup import renders_here

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)


class RenderAutoMiddleware:
    def __init__(self, crawler: Crawler, learned: LearnedRender | None, renders: bool):
        self.crawler = crawler
        self.stats = crawler.stats
        self.learned = learned
        self.renders = renders
        spider = crawler.spider
        self.needs_render = getattr(spider, "needs_render", None)
        self.selector = getattr(spider, "render_auto_selector", None) or crawler.settings.get(
            "RENDER_AUTO_SELECTOR", ""
        )
        if learned is not None and not callable(self.needs_render) and not self.selector:
            raise ValueError(
                "RENDER_AUTO needs a way to tell a page that lacks its content: set "
                "RENDER_AUTO_SELECTOR (or the spider's render_auto_selector) or give the "
                "spider a needs_render(response) method"
            )

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RenderAutoMiddleware:
        settings = crawler.settings
        renders = renders_here(settings)
        learned = learned_for(crawler) if settings.getbool("RENDER_AUTO") else None
        return cls(crawler, learned, renders)

    def process_request(self, request: Request, spider: Spider | None = None) -> Request | None:
        if request.meta.get(RENDER) is True and not self.renders:
            # a render request in a plain lane: queued again, it joins the render lane
            self.stats.inc_value("render/sent_to_render_lane")
            return request.replace(dont_filter=True)
        return None

    def process_response(
        self, request: Request, response: Response, spider: Spider | None = None
    ) -> Request | Response:
        check = request.meta.get(RENDER_CHECK)
        if check is None or self.learned is None or not 200 <= response.status < 300:
            return response
        if not isinstance(response, HtmlResponse):
            return response  # not a page a browser would build
        pattern = url_pattern(request.url)
        if not self._content_missing(response):
            if check == "recheck":
                self.learned.forget(pattern)
                self.stats.inc_value("render/auto/mispredicted/render")
                logger.info("pages of %s come whole without a browser now", pattern)
            else:
                self.stats.inc_value("render/auto/plain_ok")
            return response
        if check == "probe":
            self.learned.learn(pattern)
            self.stats.inc_value("render/auto/mispredicted/plain")
            logger.info("pages of %s need a browser: learned for the cluster", pattern)
        else:
            self.stats.inc_value("render/auto/recheck_confirmed")
        again = request.replace(dont_filter=True)
        again.meta.pop(RENDER_CHECK, None)
        again.meta[RENDER] = True
        self.stats.inc_value("render/auto/sent_to_render")
        return again

    def _content_missing(self, response: Response) -> bool:
        if callable(self.needs_render):
            return bool(self.needs_render(response))
        return not response.css(self.selector)
