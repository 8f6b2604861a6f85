"""The stream store: items as entries of a Redis stream (``ITEM_STORE = "stream"``),
for indexers and pipelines that read a stream with a consumer group.

Each entry holds the item's id (``_id``), its JSON (``item``) and, when the item
names its own collection, ``collection``. The id is the one every store gives
an item: a digest of its collection and its key field's value (``item_id``), the
key MongoDB's store upserts on. One script adds a batch (``stream_add.lua``):
an item whose id the stream holds with the same field digest is not added
again, so a page fetched twice (a node killed before its lease was released)
adds its items once; a changed item (a recrawl that found a new price) is added
as a new entry. The stream keeps ``STREAM_MAXLEN`` entries, and the ids hash
the ids of those alone: both are bounded, whatever the crawl's size.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any

import redis

from extensions.frontier.redisops import fields, load_script, run_named
from extensions.pipelines.documents import (
    KEY_FIELD,
    WriteReport,
    document_problem,
    item_id,
    keep_rejected,
)
from extensions.pipelines.mongowrites import content_hash

logger = logging.getLogger(__name__)

#: the bytes of item JSON one script call carries at most (a batch goes in several)
CALL_BYTES = 4 * 1024 * 1024
#: fields the pipeline sets for the stores, never part of an entry's item
_MARKERS = ("_collection", KEY_FIELD)


def _json_value(value: Any) -> Any:
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


class StreamStore:
    """Entries of ``key`` in ``server``, their ids in ``ids_key`` (the same hash slot)."""

    stats_prefix = "stream"

    def __init__(
        self,
        server: redis.Redis,
        key: str,
        ids_key: str,
        *,
        collection: str,
        key_field: str = "url",
        maxlen: int = 100_000,
        rejected_path: Path,
        ignore_fields: Collection[str] = (),
    ):
        self.server = server
        self.key = key
        self.ids_key = ids_key
        self.collection = collection
        self.key_field = key_field
        self.maxlen = maxlen
        self.rejected_path = rejected_path
        self.ignore_fields = frozenset(ignore_fields)
        self._script = server.register_script(load_script("extensions.pipelines:stream_add"))

    def open(self) -> WriteReport:
        return WriteReport()

    def close(self) -> WriteReport:
        return WriteReport()

    def describe(self) -> str:
        return f"the Redis stream {self.key} (at most {self.maxlen:,} entries)"

    def write(self, documents: list[dict[str, Any]]) -> WriteReport:
        report = WriteReport()
        entries: list[tuple[str, str, str, str]] = []
        for doc in documents:
            entry = self._entry(doc, report)
            if entry is not None:
                entries.append(entry)
        for call in self._calls(entries):
            items = [part for entry in call for part in entry]
            keys = {"stream": self.key, "ids": self.ids_key}
            result = fields(run_named(self._script, keys, {"maxlen": self.maxlen}, items=items))
            report.written += int(result["added"])
            report.duplicates += int(result["unchanged"])
        return report

    def _entry(self, doc: dict[str, Any], report: WriteReport) -> tuple[str, str, str, str] | None:
        key_field = doc.get(KEY_FIELD) or self.key_field
        problem = document_problem(doc, key_field, mongo_names=False)
        item = {name: value for name, value in doc.items() if name not in _MARKERS}
        if problem is None:
            try:
                payload = json.dumps(item, ensure_ascii=False, default=_json_value)
            except (TypeError, ValueError, RecursionError) as exc:
                problem = f"not encodable as JSON: {exc}"
        if problem is not None:
            keep_rejected(self.rejected_path, doc, doc.get(key_field), problem, report)
            return None
        collection = doc.get("_collection") or ""
        digest = content_hash(item, self.ignore_fields)
        return item_id(doc, self.key_field, self.collection), digest, collection, payload

    @staticmethod
    def _calls(
        entries: list[tuple[str, str, str, str]],
    ) -> Iterator[list[tuple[str, str, str, str]]]:
        call: list[tuple[str, str, str, str]] = []
        size = 0
        for entry in entries:
            if call and size + len(entry[3]) > CALL_BYTES:
                yield call
                call, size = [], 0
            call.append(entry)
            size += len(entry[3])
        if call:
            yield call
