"""Spiders for ``make bench``: the project's shop spider with a fixed start URL,
so the same spider logic runs under every scheduler being compared."""

from crawler.spiders.shop import ShopSpider


class BenchShopSpider(ShopSpider):
    name = "bench_shop"

    def __init__(self, *args, start: str = "", **kwargs):
        super().__init__(*args, **kwargs)
        self.start_urls = [start] if start else []
