"""A RedisSpider as scrapy-redis users write them, with a make_request_from_data override."""

import scrapy
from scrapy_redis.spiders import RedisSpider
from scrapy_redis.utils import bytes_to_str


class BooksSpider(RedisSpider):
    name = "books"
    redis_key = "books:start_urls"
    item_key_field = "link"

    def make_request_from_data(self, data):
        url = bytes_to_str(data, self.redis_encoding)
        return scrapy.Request(url, callback=self.parse, dont_filter=True)

    def parse(self, response):
        for href in response.css("a.page::attr(href)").getall():
            yield response.follow(href, self.parse)
        for href in response.css("li.product a::attr(href)").getall():
            yield response.follow(href, self.parse_product)

    def parse_product(self, response):
        yield {"link": response.url, "name": response.css("h1.name::text").get()}
