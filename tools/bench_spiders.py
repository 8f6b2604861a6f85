"""Spiders used only by ``make bench`` (loaded with ``SPIDER_MODULES``)."""

from scrapy import Request, Spider
from scrapy.linkextractors import LinkExtractor
from scrapy_redis.spiders import RedisSpider

from crawler.spiders.jsshop import JsShopSpider
from crawler.spiders.shop import ShopSpider
from extensions.spiders import DistributedSpider


class StockIdleSpider(RedisSpider):
    """Stock scrapy-redis: start URLs from ``stock_idle:start_urls``, read when the
    engine finds the spider idle; fetches each start URL and nothing more."""

    name = "stock_idle"

    def parse(self, response):
        return None


class PlainShopSpider(Spider):
    """What a Scrapy user runs instead: a plain spider with the ``shop`` spider's
    parsing, its start URL given with ``-a start=URL``, items written by a feed export."""

    name = "plain_shop"
    parse = ShopSpider.parse
    parse_category = ShopSpider.parse_category
    parse_product = ShopSpider.parse_product

    def __init__(self, *args, start: str = "", **kwargs):
        super().__init__(*args, **kwargs)
        self.start_urls = [start]


class PlainSiteSpider(Spider):
    """What a Scrapy user runs instead of ``site``: a plain spider that stores a
    page's URL and title and follows its links matching ``-a allow=REGEX`` (comma
    separated), from ``-a start=URL,URL``; items written by a feed export."""

    name = "plain_site"

    def __init__(self, *args, start: str = "", allow: str = "", **kwargs):
        super().__init__(*args, **kwargs)
        self.start_urls = [url for url in start.split(",") if url]
        self.link_extractor = LinkExtractor(allow=[p for p in allow.split(",") if p])

    def parse(self, response):
        yield {"url": response.url, "title": response.css("title::text").get()}
        for link in self.link_extractor.extract_links(response):
            yield response.follow(link)


class StockShopSpider(RedisSpider):
    """Stock scrapy-redis's RedisSpider with the ``shop`` spider's parsing."""

    name = "stock_shop"
    parse = ShopSpider.parse
    parse_category = ShopSpider.parse_category
    parse_product = ShopSpider.parse_product


async def _scroll_to_end(page, times: int = 10, wait: int = 2000) -> None:
    """What a scrapy-playwright user writes to load an endless list."""
    for _ in range(times):
        height = await page.evaluate("document.scrollingElement.scrollHeight")
        await page.evaluate("window.scrollTo(0, document.scrollingElement.scrollHeight)")
        try:
            await page.wait_for_function(
                "h => document.scrollingElement.scrollHeight > h", arg=height, timeout=wait
            )
        except Exception:
            return


class PlainPlaywrightSpider(Spider):
    """What a Scrapy user runs for JavaScript pages instead: plain Scrapy with
    scrapy-playwright's download handler, ``meta["playwright"]`` on every request,
    the ``jsshop`` spider's parsing; ``-a start=URL -a more=URL,URL``."""

    name = "plain_playwright"
    custom_settings = {
        "DOWNLOAD_HANDLERS": {
            "http": "scrapy_playwright.handler.ScrapyPlaywrightDownloadHandler",
            "https": "scrapy_playwright.handler.ScrapyPlaywrightDownloadHandler",
        },
    }

    def __init__(self, *args, start: str = "", more: str = "", **kwargs):
        super().__init__(*args, **kwargs)
        self.start_urls = [start, *(url for url in more.split(",") if url)]

    async def start(self):
        for url in self.start_urls:
            yield Request(url, meta={"playwright": True})

    def parse(self, response):
        from scrapy_playwright.page import PageMethod

        yield {
            "url": response.url,
            "title": response.css("h1::text").get(),
            "price": response.css(".price::text").get(),
            "links": len(response.css("a.item")),
            "rows": len(response.css("tr.row")),
        }
        for href in response.css("a::attr(href)").getall():
            meta: dict = {"playwright": True}
            if href.endswith("/js/list"):
                meta["playwright_page_methods"] = [PageMethod(_scroll_to_end)]
            elif href.endswith("/js/data"):
                meta["playwright_page_methods"] = [PageMethod("wait_for_selector", "tr.row")]
            if "/js/" in response.urljoin(href):
                yield response.follow(href, meta=meta)


class MixedSpider(JsShopSpider):
    """A site of static and JavaScript pages for RENDER_AUTO: static pages are
    stored and not followed, the /js/ shop is crawled as ``jsshop`` crawls it."""

    name = "mixed"
    render_urls: list[str] = []

    def parse(self, response):
        if "/js/" not in response.url:
            yield {"url": response.url, "title": response.css("h1::text").get()}
            return
        yield from super().parse(response)


class FollowSiteSpider(DistributedSpider):
    """A DistributedSpider written as ``plain_site`` is, with the link path
    (``follow_links``): it stores a page's URL and title and follows its links
    matching ``-a allow=REGEX``; start URLs from Redis."""

    name = "follow_site"

    def __init__(self, *args, allow: str = "", **kwargs):
        super().__init__(*args, **kwargs)
        self.link_extractor = LinkExtractor(allow=[p for p in allow.split(",") if p])

    def parse(self, response):
        yield {"url": response.url, "title": response.css("title::text").get()}
        yield from self.follow_links(response, self.link_extractor)


class PlainFollowSiteSpider(DistributedSpider):
    """``plain_site``'s parsing unchanged (``response.follow`` for each link) in a
    DistributedSpider: what a project gets before it takes up ``follow_links``."""

    name = "follow_plain_site"

    def __init__(self, *args, allow: str = "", **kwargs):
        super().__init__(*args, **kwargs)
        self.link_extractor = LinkExtractor(allow=[p for p in allow.split(",") if p])

    parse = PlainSiteSpider.parse
