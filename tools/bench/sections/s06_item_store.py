"""``make bench`` section 6: the MongoDB item store against per-item inserts and JSON Lines."""

from __future__ import annotations

import uuid

import pymongo

from tools.bench.base import Bench, Section, mongo_server
from tools.bench_crawl import Figures, crawl_once
from tools.bench_measures import STORE_VARIANTS, THREE_CATEGORIES, crawl_variants, store_rates
from tools.bench_reports import report_store


class ItemStore(Section):
    number = 6
    title = "the MongoDB item store against per-item inserts and JSON Lines"

    needs_mongo = True

    def __init__(self) -> None:
        self.stores: dict[str, list[float]] = {name: [] for name in STORE_VARIANTS}
        self.crawls = {name: Figures() for name in crawl_variants("")}

    def measure(self, bench: Bench, run: int) -> None:
        assert bench.mongo_uri is not None
        for name, rate in store_rates(bench.mongo_uri, bench.work).items():
            self.stores[name].append(rate)
        for name, settings in crawl_variants(bench.mongo_uri).items():
            database = f"bench_{uuid.uuid4().hex[:8]}"
            self.crawls[name].samples.append(
                crawl_once(
                    bench.redis_url,
                    {**settings, "MONGO_DATABASE": database},
                    1,
                    bench.work / f"store-{run}",
                    spider="site",
                    spider_args=THREE_CATEGORIES,
                )
            )
            with pymongo.MongoClient(bench.mongo_uri) as client:
                client.drop_database(database)

    def report(self, bench: Bench) -> None:
        report_store(self.stores, self.crawls, mongo_server(bench))
