"""Spiders used only by the tests (``-s SPIDER_MODULES=tests.spiders``)."""

import time

from scrapy import Request, Spider

from extensions.spiders import DistributedSitemapSpider, DistributedSpider


class OwnStartSpider(DistributedSpider):
    """An existing spider with its own start_requests(), made distributed by its base class."""

    name = "ownstart"

    def __init__(self, start: str = "", **kwargs):
        super().__init__(**kwargs)
        self.start_url = start

    def start_requests(self):
        yield Request(self.start_url, dont_filter=True)

    def parse(self, response):
        yield {"url": response.url, "title": response.css("title::text").get()}


class BadMetaSpider(DistributedSpider):
    """Yields one request that cannot be stored as JSON, and one that can."""

    name = "badmeta"

    def parse(self, response):
        yield response.follow("/about", meta={"handle": object()}, callback=self.parse_page)
        yield response.follow("/category/books", callback=self.parse_page)

    def parse_page(self, response):
        yield {"url": response.url}


class NoKeySpider(DistributedSpider):
    """Yields one item the store must reject (no url) next to a good one."""

    name = "nokey"

    def parse(self, response):
        yield {"title": "an item without its key"}
        yield {"url": response.url, "title": response.css("title::text").get()}


class ScrapyRedisStyleSpider(DistributedSpider):
    """A make_request_from_data override as written for scrapy-redis: it returns
    None for some entries and raises on others; neither may stop the spider."""

    name = "fromdata"

    def make_request_from_data(self, data):
        text = data.decode(self.redis_encoding)  # scrapy-redis's attribute
        if text.endswith("/skip"):
            return None
        if text.endswith("/boom"):
            raise RuntimeError("cannot handle this entry")
        return super().make_request_from_data(data)

    def parse(self, response):
        yield {"url": response.url}

    def _private(self, response):  # a queue entry must not reach this
        self.name = "hijacked"


class PlainSpider(Spider):
    """An ordinary Scrapy spider in a project with the add-on: it reads no start
    URLs from Redis, so it closes when the crawl's work is done."""

    name = "plain"

    def __init__(self, start: str = "", **kwargs):
        super().__init__(**kwargs)
        self.start_urls = [start]

    def parse(self, response):
        yield {"url": response.url}


class BooksSitemapSpider(DistributedSitemapSpider):
    """The books' product pages, found from robots.txt through the sitemap index."""

    name = "books_sitemap"
    sitemap_follow = [r"sitemap\.xml$", r"-books\.xml$"]
    sitemap_rules = [("/product/", "parse_product")]

    def parse_product(self, response):
        yield {"url": response.url, "name": response.css(".name::text").get()}


class BooksFromRobotsSpider(DistributedSpider):
    """A plain DistributedSpider with sitemap rules: run with SITEMAP_FROM_ROBOTS,
    its start page's robots.txt leads it to the books' sitemap."""

    name = "books_robots"
    sitemap_follow = [r"sitemap\.xml$", r"-books\.xml$"]
    sitemap_rules = [("/product/", "parse_product")]

    def __init__(self, start: str = "", **kwargs):
        super().__init__(**kwargs)
        self.start_urls = [start]

    def parse(self, response):
        yield {"url": response.url, "kind": "page"}

    def parse_product(self, response):
        yield {"url": response.url, "kind": "product"}


class ScoredBooksSpider(DistributedSpider):
    """The products on the first page of books, the highest id first
    (``score_request``); for ids that are multiples of 5 the scorer raises, for
    multiples of 7 it gives NaN."""

    name = "scored_books"

    def parse(self, response):
        for href in response.css("li.product a::attr(href)").getall():
            yield response.follow(href, callback=self.parse_product)

    def parse_product(self, response):
        yield {"url": response.url, "at": time.time()}

    def score_request(self, request, response):
        product = int(request.url.rsplit("/", 1)[1])
        if product % 5 == 0:
            raise ValueError("a scorer's own bug")
        if product % 7 == 0:
            return float("nan")
        return product


class ManyOutputsSpider(DistributedSpider):
    """Twelve items and a link from the start page; from the link, two items and then an error."""

    name = "outputs"

    def parse(self, response):
        for n in range(12):
            yield {"url": f"{response.url}?item={n}"}
        yield response.follow("/about", callback=self.parse_broken)

    def parse_broken(self, response):
        yield {"url": response.url + "?item=a"}
        yield {"url": response.url + "?item=b"}
        raise RuntimeError("the callback broke after two items")
