"""``shop_sitemap``: the demo shop's products, found through its sitemaps.

scrapy seed shop_sitemap --sitemap http://127.0.0.1:8000/robots.txt
"""

from __future__ import annotations

from crawler.spiders.shop import ShopSpider
from extensions.spiders import DistributedSitemapSpider


class ShopSitemapSpider(DistributedSitemapSpider):
    name = "shop_sitemap"
    recrawl_ignore_fields = ("fetched_at",)  # set by the spider: no change
    sitemap_rules = [("/product/", "parse_product")]

    parse_product = ShopSpider.parse_product
