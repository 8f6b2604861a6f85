"""``jsshop``: the demo site's pages that JavaScript builds (``/js/``).

Seed it with the site's ``/js/`` page (``scrapy seed jsshop URL/js/``). Its
pages are rendered by a render node: every URL under ``/js/`` matches the
spider's ``render_urls``, the endless list is scrolled to its end and the data
page waits for its table (page actions, plain JSON in the queue). Set
``-a render=auto`` to have the cluster learn instead (RENDER_AUTO): pages whose
``h1`` is missing are rendered, and their URL pattern with them.
"""

from __future__ import annotations

from crawler.items import RenderedItem
from extensions.spiders import DistributedSpider

LIST_ACTIONS = [{"method": "scroll", "kwargs": {"times": 10, "wait": 2000}}]
DATA_ACTIONS = [{"method": "wait_for_selector", "args": ["tr.row"]}]


class JsShopSpider(DistributedSpider):
    name = "jsshop"
    render_urls = [r"/js/"]
    render_auto_selector = "h1"  # RENDER_AUTO: a page without its h1 lacks its content

    def __init__(self, *args, render: str = "urls", **kwargs):
        super().__init__(*args, **kwargs)
        if render not in ("urls", "auto"):
            raise ValueError(f"-a render must be urls or auto, not {render!r}")
        if render == "auto":
            self.render_urls = []

    @classmethod
    def from_crawler(cls, crawler, *args, **kwargs):
        if kwargs.get("render") == "auto":
            crawler.settings.set("RENDER_AUTO", True, priority="spider")
        return super().from_crawler(crawler, *args, **kwargs)

    def parse(self, response):
        yield RenderedItem(
            url=response.url,
            title=response.css("h1::text").get(),
            price=response.css(".price::text").get(),
            links=len(response.css("a.item")),
            rows=len(response.css("tr.row")),
            rendered="playwright" in response.flags,
        )
        for href in response.css("a::attr(href)").getall():
            meta = {}
            if href.endswith("/js/list"):
                meta["render_actions"] = LIST_ACTIONS
            elif href.endswith("/js/data"):
                meta["render_actions"] = DATA_ACTIONS
            if "/js/" in response.urljoin(href):
                yield response.follow(href, meta=meta)
