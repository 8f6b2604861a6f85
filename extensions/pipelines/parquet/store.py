"""The Parquet store: a batch's rows spooled on the node's disk, synced before
the pipeline is told they are durable; files are made of them later, when their
pages' leases are released (``part.py``).

Each row is the item's fields, as the crawl's schema types them, with ``_id``
(the id every store gives an item) and the page it came from beside it. An item
the schema cannot hold (a field of another type than the crawl's files have, a
value Parquet has no type for) goes to the rejected items with the reason.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from extensions.pipelines.documents import (
    KEY_FIELD,
    WriteReport,
    document_problem,
    item_id,
    keep_rejected,
)
from extensions.pipelines.parquet.schema import ValueProblem
from extensions.pipelines.parquet.state import parquet_state

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)


class ParquetStore:
    stats_prefix = "parquet"
    #: the pipeline gives ``write_pages`` each document's page (its lease member)
    takes_pages = True

    def __init__(self, crawler: Crawler, *, where: str, collection: str, key_field: str,
                 max_size: int, rejected_path: Path):  # fmt: skip
        self.crawler = crawler
        self.where = where
        self.collection = collection
        self.key_field = key_field
        self.max_size = max_size
        self.rejected_path = rejected_path

    def open(self) -> WriteReport:
        parquet_state(self.crawler).schema.load()
        return WriteReport()

    def close(self) -> WriteReport:
        return WriteReport()

    def describe(self) -> str:
        return f"Parquet files in {self.where}"

    def write(self, documents: list[dict[str, Any]]) -> WriteReport:
        return self.write_pages(documents, [b""] * len(documents))

    def write_pages(self, documents: list[dict[str, Any]], pages: list[bytes]) -> WriteReport:
        state = parquet_state(self.crawler)
        report = WriteReport()
        items = []
        for doc in documents:
            item = {name: value for name, value in doc.items() if name != KEY_FIELD}
            item["_id"] = item_id(doc, self.key_field, self.collection)
            items.append(item)
        state.schema.learn(items)  # a Redis error: the batch is tried again
        rows: list[tuple[bytes, dict[str, Any]]] = []
        for doc, item, page in zip(documents, items, pages, strict=True):
            key_field = doc.get(KEY_FIELD) or self.key_field
            problem = document_problem(doc, key_field, mongo_names=False)
            if problem is None:
                try:
                    rows.append((page, state.schema.row(item)))
                    continue
                except ValueProblem as exc:
                    problem = str(exc)
            keep_rejected(self.rejected_path, doc, doc.get(key_field), problem, report)
        state.spool.write(rows, self.max_size)
        report.written = len(rows)
        return report
