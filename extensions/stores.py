"""Where items end up: MongoDB when ``MONGO_URI`` is set, else JSON Lines files.

A store's ``write`` runs in a worker thread and returns only once the batch is
durable (acknowledged by MongoDB, or written and fsync'ed to disk).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any, Protocol

logger = logging.getLogger(__name__)


class ItemStore(Protocol):
    def open(self) -> None: ...
    def write(self, documents: list[dict[str, Any]]) -> None: ...
    def close(self) -> None: ...
    def describe(self) -> str: ...


class JsonLinesStore:
    """One ``DIR/SPIDER/NODE.jsonl`` file per node, so nodes never share a file."""

    def __init__(self, directory: str | Path, spider_name: str, node_id: str):
        self.path = Path(directory) / spider_name / f"{node_id}.jsonl"
        self._file = None

    def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - kept open for the crawl

    def write(self, documents: list[dict[str, Any]]) -> None:
        assert self._file is not None
        lines = "".join(
            json.dumps(doc, ensure_ascii=False, default=str) + "\n" for doc in documents
        )
        self._file.write(lines)
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def describe(self) -> str:
        return str(self.path)


class MongoStore:
    """Bulk upserts keyed on a unique field, so a page stored twice stays one document."""

    def __init__(self, uri: str, database: str, collection: str, key_field: str = "url"):
        self.uri = uri
        self.database = database
        self.collection_name = collection
        self.key_field = key_field
        self.client = None
        self.collection = None

    def open(self) -> None:
        import pymongo

        self.client = pymongo.MongoClient(self.uri, serverSelectionTimeoutMS=10_000)
        self.collection = self.client[self.database][self.collection_name]
        self.collection.create_index([(self.key_field, pymongo.ASCENDING)], unique=True)

    def write(self, documents: list[dict[str, Any]]) -> None:
        from pymongo import UpdateOne

        assert self.collection is not None
        operations = [
            UpdateOne({self.key_field: doc[self.key_field]}, {"$set": doc}, upsert=True)
            for doc in documents
        ]
        self.collection.bulk_write(operations, ordered=False)

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None

    def describe(self) -> str:
        return f"MongoDB {self.database}.{self.collection_name}"
