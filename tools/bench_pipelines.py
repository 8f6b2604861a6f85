"""The usual Scrapy MongoDB pipeline, for ``make bench`` to compare against:
one ``insert_one`` per item, on the reactor thread."""

from __future__ import annotations

import pymongo
from itemadapter import ItemAdapter


class InsertOnePipeline:
    def __init__(self, uri: str, database: str, collection: str):
        self.uri = uri
        self.database = database
        self.collection_name = collection
        self.client: pymongo.MongoClient | None = None

    @classmethod
    def from_crawler(cls, crawler):
        return cls(
            crawler.settings["MONGO_URI"],
            crawler.settings["MONGO_DATABASE"],
            crawler.spidercls.name,
        )

    def open_spider(self) -> None:
        self.client = pymongo.MongoClient(self.uri)
        self.collection = self.client[self.database][self.collection_name]

    def close_spider(self) -> None:
        if self.client is not None:
            self.client.close()

    def process_item(self, item):
        self.collection.insert_one(ItemAdapter(item).asdict())
        return item
