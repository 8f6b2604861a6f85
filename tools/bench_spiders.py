"""Spiders used only by ``make bench`` (loaded with ``SPIDER_MODULES``)."""

from scrapy import Spider
from scrapy_redis.spiders import RedisSpider

from crawler.spiders.shop import ShopSpider


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


class StockShopSpider(RedisSpider):
    """Stock scrapy-redis's RedisSpider with the ``shop`` spider's parsing."""

    name = "stock_shop"
    parse = ShopSpider.parse
    parse_category = ShopSpider.parse_category
    parse_product = ShopSpider.parse_product
