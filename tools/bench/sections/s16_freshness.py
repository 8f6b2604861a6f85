"""``make bench`` section 16: keeping a crawl fresh: recrawls with and without validators."""

from __future__ import annotations

from tools import recrawl_bench
from tools.bench.base import Bench, Section, mongo_server
from tools.bench_crawl import CONCURRENCY


class Freshness(Section):
    number = 16
    title = "keeping a crawl fresh: recrawls with and without validators"

    once = True
    needs_mongo = True

    def measure(self, bench: Bench, run: int) -> None:
        assert bench.mongo_uri is not None
        self.freshness = recrawl_bench.measure(
            bench.redis_url, bench.mongo_uri, bench.work / "fresh", CONCURRENCY
        )

    def report(self, bench: Bench) -> None:
        recrawl_bench.report(self.freshness, mongo_server(bench))
