"""``shop``: typed product items from the bundled demo shop, following pagination."""

from __future__ import annotations

from datetime import UTC, datetime

from crawler.items import ProductItem
from extensions.spiders import DistributedSpider


class ShopSpider(DistributedSpider):
    name = "shop"
    recrawl_ignore_fields = ("fetched_at",)  # set by the spider: no change

    def parse(self, response):
        """The home page: one request per category."""
        for href in response.css("a.category::attr(href)").getall():
            yield response.follow(href, callback=self.parse_category)

    def parse_category(self, response):
        for href in response.css("li.product a::attr(href)").getall():
            yield response.follow(href, callback=self.parse_product)
        next_page = response.css("a[rel=next]::attr(href)").get()
        if next_page:
            yield response.follow(next_page, callback=self.parse_category)

    def parse_product(self, response):
        box = response.css("div.product")
        yield ProductItem(
            url=response.url,
            product_id=int(box.attrib["data-id"]),
            sku=box.css(".sku::text").get(),
            name=box.css(".name::text").get(),
            price=float(box.css(".price::text").get()),
            currency=box.css(".price::attr(data-currency)").get(),
            rating=float(box.css(".rating::text").get()),
            in_stock=box.css(".stock::text").get() == "in stock",
            category=box.css("a.category::text").get(),
            fetched_at=datetime.now(UTC).isoformat(),
        )
        for href in response.css("ul.related a::attr(href)").getall():
            yield response.follow(href, callback=self.parse_product)
