"""Where items end up: MongoDB when ``MONGO_URI`` is set (``extensions.pipelines.mongo``),
else JSON Lines files.

A store's ``write`` runs in a worker thread and returns only once the batch is
durable (acknowledged by MongoDB, spilled to its journal, or written and
fsync'ed to disk), with a report of what happened.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any, Protocol, TextIO

from extensions.pipelines.documents import WriteReport, document_problem, keep_rejected

logger = logging.getLogger(__name__)

__all__ = ["ItemStore", "JsonLinesStore", "WriteReport"]


class ItemStore(Protocol):
    stats_prefix: str

    def open(self) -> WriteReport: ...
    def write(self, documents: list[dict[str, Any]]) -> WriteReport: ...
    def close(self) -> WriteReport: ...
    def describe(self) -> str: ...


class JsonLinesStore:
    """One ``DIR/SPIDER/NODE.jsonl`` file per node, so nodes never share a file."""

    stats_prefix = "jsonl"

    def __init__(self, directory: str | Path, spider_name: str, node_id: str):
        self.path = Path(directory) / spider_name / f"{node_id}.jsonl"
        self.rejected_path = self.path.parent / "rejected.jsonl"
        self._file: TextIO | None = None

    def open(self) -> WriteReport:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - kept open for the crawl
        return WriteReport()

    def write(self, documents: list[dict[str, Any]]) -> WriteReport:
        assert self._file is not None
        report = WriteReport()
        kept = []
        for doc in documents:
            problem = document_problem(doc, mongo_names=False)
            if problem:
                keep_rejected(self.rejected_path, doc, None, problem, report)
            else:
                kept.append(doc)
        documents = kept
        lines = "".join(
            json.dumps({k: v for k, v in doc.items() if k not in ("_collection", "_key_field")},
                       ensure_ascii=False, default=str) + "\n"
            for doc in documents
        )  # fmt: skip
        self._file.write(lines)
        self._file.flush()
        os.fsync(self._file.fileno())
        report.written = len(documents)
        return report

    def close(self) -> WriteReport:
        if self._file is not None:
            self._file.close()
            self._file = None
        return WriteReport()

    def describe(self) -> str:
        return str(self.path)
