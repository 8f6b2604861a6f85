"""Spiders used only by ``make bench`` (loaded with ``SPIDER_MODULES``)."""

from scrapy_redis.spiders import RedisSpider


class StockIdleSpider(RedisSpider):
    """Stock scrapy-redis: start URLs from ``stock_idle:start_urls``, read when the
    engine finds the spider idle; fetches each start URL and nothing more."""

    name = "stock_idle"

    def parse(self, response):
        return None
