"""The MongoDB item store: bulk upserts, retries, a spill journal, rejected items.

Runs in the pipeline's worker thread, never on the reactor. For each batch:

1. documents MongoDB can never take (no key field, not encodable as BSON, over
   16 MB) are set aside in ``rejected.jsonl`` with the reason and never block
   the rest of the batch;
2. the rest go in one unordered ``bulk_write`` per collection, as upserts keyed
   on a unique field (``$set`` the item and ``_updated_at``, ``$setOnInsert``
   ``_first_seen``), so a page stored twice stays one document;
3. transient failures (connection lost, primary stepped down, timeouts, server
   selection) are retried with backoff for up to ``MONGO_RETRY_TIME`` seconds;
4. past that the batch is spilled to a local journal on disk (BSON files, the
   ``mongodump`` format) and counts as stored; the journal is replayed as soon
   as MongoDB answers again, or at the next start.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

import bson
import pymongo
from pymongo import UpdateOne
from pymongo.errors import (
    BulkWriteError,
    DocumentTooLarge,
    InvalidDocument,
    OperationFailure,
    PyMongoError,
)

from extensions import defaults
from extensions.connection import mongo_client
from extensions.pipelines.documents import (
    KEY_FIELD,
    WriteReport,
    document_problem,
    item_id,
    keep_rejected,
)
from extensions.pipelines.journal import Journal
from extensions.pipelines.mongowrites import (
    CHANGED_AT,
    CONTENT_HASH,
    DUPLICATE_KEY,
    MAX_DOCUMENT_BYTES,
    TRANSIENT_CODES,
    WRITE_MODES,
    RefusedForNow,
    content_hash,
    is_transient,
    write_of,
)

logger = logging.getLogger(__name__)


class MongoStore:
    def __init__(
        self,
        uri: str,
        database: str,
        collection: str,
        *,
        key_field: str = "url",
        node_id: str = "",
        journal_dir: Path | str = defaults.MONGO_JOURNAL_DIR,
        mode: str = defaults.MONGO_WRITE_MODE,
        retry_time: float = defaults.MONGO_RETRY_TIME,
        server_selection_timeout: float = 5.0,
        ignore_fields: Collection[str] = (),
    ):
        if mode not in WRITE_MODES:
            raise ValueError(f"MONGO_WRITE_MODE must be one of {WRITE_MODES}, not {mode!r}")
        self.uri = uri
        self.database_name = database
        self.collection_name = collection
        self.key_field = key_field
        self.mode = mode
        self.retry_time = retry_time
        self.ignore_fields = frozenset(ignore_fields)  # not content: no change when they differ
        self.server_selection_timeout = server_selection_timeout
        self.journal = Journal(Path(journal_dir), node_id)
        self.rejected_path = Path(journal_dir) / "rejected.jsonl"
        self.client: pymongo.MongoClient | None = None
        self._indexed: set[str] = set()
        self._key_hint_said = False
        self._outage_since: float | None = None

    # --- lifecycle (worker thread) ---------------------------------------------

    def open(self) -> WriteReport:
        self.client = mongo_client(self.uri, self.server_selection_timeout)
        self.journal.reclaim_abandoned()
        try:
            self._ensure_indexes(self.collection_name)
        except PyMongoError as exc:
            if not is_transient(exc):
                raise
            logger.warning("MongoDB is not answering yet (%s); items will wait in the journal", exc)
            self._outage_since = time.monotonic()
            return WriteReport()
        return self.replay_journal()

    def close(self) -> WriteReport:
        # a crawl may end in an outage over by then, which no write saw end
        if self._outage_since is not None and self.client is not None and self._answers():
            self._outage_since = None
        report = self.replay_journal() if self._outage_since is None else WriteReport()
        left = len(self.journal.pending())
        if left:
            logger.warning(
                "%d spilled batches wait in %s; the next start replays them",
                left,
                self.journal.directory,
            )
        if self.client is not None:
            self.client.close()
            self.client = None
        return report

    stats_prefix = "mongo"

    def describe(self) -> str:
        return (
            f"MongoDB {self.database_name}.{self.collection_name} "
            f"({self.mode} on {self.key_field!r})"
        )

    # --- writing (worker thread) -----------------------------------------------

    def write(self, documents: list[dict[str, Any]]) -> WriteReport:
        report = WriteReport()
        now = dt.datetime.now(dt.UTC)
        valid = self._set_aside(documents, self._unacceptable, report)
        for doc in valid:
            doc.setdefault("_fetched_at", now)
        if not valid:
            return report
        if self._outage_since is not None and not self._answers():
            self._spill(valid, report)
            return report
        try:
            self._write_with_retries(valid, report, now)
        except PyMongoError as exc:
            if not is_transient(exc):
                raise
            if self._outage_since is None:
                self._outage_since = time.monotonic()
                logger.error(
                    "MongoDB unreachable for %.0fs (%s); spilling batches to %s until it is back",
                    self.retry_time,
                    exc,
                    self.journal.directory,
                )
            self._spill(valid, report)
            return report
        if self._outage_since is not None:
            logger.warning(
                "MongoDB is back after %.1fs; replaying the journal",
                time.monotonic() - self._outage_since,
            )
            self._outage_since = None
        if self.journal.pending():
            report.add(self.replay_journal())
        return report

    def replay_journal(self) -> WriteReport:
        report = WriteReport()
        for path in self.journal.pending():
            claimed = self.journal.claim(path)
            if claimed is None:
                continue
            docs = self.journal.read(claimed)
            try:
                batch = WriteReport()
                self._write_with_retries(docs, batch, dt.datetime.now(dt.UTC), attempts_for=5.0)
            except PyMongoError as exc:
                self.journal.release(claimed, done=False)
                logger.warning("replaying %s failed (%s); will try again", path.name, exc)
                break
            self.journal.release(claimed, done=True)
            report.replayed += batch.written + batch.duplicates
            report.rejected += batch.rejected
            report.rejections += batch.rejections
            report.retried += batch.retried
        if report.replayed:
            logger.info("replayed %d items from the journal into MongoDB", report.replayed)
        return report

    def _answers(self) -> bool:
        assert self.client is not None
        try:
            self.client.admin.command("ping")
        except PyMongoError:
            return False
        return True

    def _set_aside(self, docs: list[dict[str, Any]], problem_of, report: WriteReport):
        """The documents without a problem; the others are rejected, with it."""
        kept = []
        for doc in docs:
            problem = problem_of(doc)
            if problem:
                self._reject(doc, problem, report)
            else:
                kept.append(doc)
        return kept

    def _unacceptable(self, doc: dict[str, Any]) -> str | None:
        return document_problem(doc, self._key_of(doc))

    def _key_of(self, doc: dict[str, Any]) -> str:
        """The document's key field: its item class's ``item_key_field``, else the store's."""
        return doc.get(KEY_FIELD) or self.key_field

    def _size_problem(self, doc: dict[str, Any]) -> str | None:
        try:
            size = len(bson.encode(doc))
        except (InvalidDocument, TypeError, ValueError, OverflowError) as exc:
            return f"not encodable as BSON: {exc}"
        if size > MAX_DOCUMENT_BYTES:
            return f"{size} bytes, over MongoDB's 16 MB document limit"
        return None

    def _write_with_retries(
        self,
        docs: list[dict[str, Any]],
        report: WriteReport,
        now: dt.datetime,
        attempts_for: float | None = None,
    ) -> None:
        deadline = time.monotonic() + (self.retry_time if attempts_for is None else attempts_for)
        delay = 0.25
        pending = docs
        while True:
            try:
                pending = self._write_once(pending, report, now)
            except (InvalidDocument, DocumentTooLarge):
                # The batch could not even be encoded: find the culprits, keep the rest.
                pending = self._set_aside(pending, self._size_problem, report)
                continue
            except PyMongoError as exc:
                if not is_transient(exc) or time.monotonic() + delay > deadline:
                    raise
                report.retried += len(pending)
                logger.debug("transient MongoDB error (%s); retrying in %.2fs", exc, delay)
                time.sleep(delay)  # a worker thread: the reactor is not waiting on this
                delay = min(delay * 2, 5.0)
                continue
            if not pending:
                return
            # Documents to write again: the same pause and the same deadline as a
            # failed batch, or a store that keeps answering so would spin a core.
            if time.monotonic() + delay > deadline:
                raise RefusedForNow(
                    f"{len(pending)} documents still to be written again after the retry time"
                )
            report.retried += len(pending)
            logger.debug("%d documents to write again; retrying in %.2fs", len(pending), delay)
            time.sleep(delay)
            delay = min(delay * 2, 5.0)

    def _write_once(
        self, docs: list[dict[str, Any]], report: WriteReport, now: dt.datetime
    ) -> list[dict[str, Any]]:
        """One bulk write per collection; returns the documents to try again."""
        assert self.client is not None
        retry: list[dict[str, Any]] = []
        for name, group in self._by_collection(docs).items():
            self._ensure_indexes(name, self._key_of(group[0]))
            collection = self.client[self.database_name][name]
            hashes = [content_hash(doc, self.ignore_fields) for doc in group]
            if self.mode == "upsert":
                group, hashes = self._mark_changed(collection, group, hashes, report, now, retry)
                if not group:
                    continue
            operations = [
                write_of(d, self._key_of(d), h, now, self.mode, item_id(d, self.key_field, name))
                for d, h in zip(group, hashes, strict=True)
            ]
            try:
                result = collection.bulk_write(operations, ordered=False)
            except BulkWriteError as exc:
                details = exc.details
                failed = {}
                for error in details.get("writeErrors", []):
                    failed[error["index"]] = error
                for index, error in failed.items():
                    doc = group[index]
                    if error.get("code") == DUPLICATE_KEY:
                        if self.mode == "insert":
                            report.duplicates += 1  # already stored: the unique index did its job
                        else:
                            retry.append(doc)  # two nodes upserted the same key at once
                    elif error.get("code") in TRANSIENT_CODES:
                        retry.append(doc)
                    else:
                        self._reject(doc, f"refused by MongoDB: {error.get('errmsg')}", report)
                report.written += len(group) - len(failed)
                continue
            report.written += result.upserted_count + result.matched_count + result.inserted_count
        return retry

    def _mark_changed(
        self,
        collection: Any,
        docs: list[dict[str, Any]],
        hashes: list[str],
        report: WriteReport,
        now: dt.datetime,
        retry: list[dict[str, Any]],
    ) -> tuple[list[dict[str, Any]], list[str]]:
        """Move ``_changed_at`` of the stored documents whose fields differ from
        the new version's, before the upsert writes the new version: a separate
        write, as an update's own filter cannot both match and compare. Returns
        the documents to upsert; those that met a transient error wait in ``retry``."""
        marks = [
            UpdateOne(
                {self._key_of(doc): doc[self._key_of(doc)], CONTENT_HASH: {"$ne": digest}},
                {"$set": {CHANGED_AT: now}},
            )
            for doc, digest in zip(docs, hashes, strict=True)
        ]
        try:
            result = collection.bulk_write(marks, ordered=False)
        except BulkWriteError as exc:
            # Other refusals are the upsert's to report, with the document kept.
            again = {
                error["index"]
                for error in exc.details.get("writeErrors", [])
                if error.get("code") in TRANSIENT_CODES
            }
            report.changed += exc.details.get("nModified", 0)
            retry += [doc for index, doc in enumerate(docs) if index in again]
            kept = [i for i in range(len(docs)) if i not in again]
            return [docs[i] for i in kept], [hashes[i] for i in kept]
        report.changed += result.modified_count
        return docs, hashes

    def _by_collection(self, docs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
        groups: dict[str, list[dict[str, Any]]] = {}
        for doc in docs:
            name = doc.get("_collection") or self.collection_name
            groups.setdefault(name, []).append(doc)
        return groups

    def _ensure_indexes(self, name: str, key_field: str | None = None) -> None:
        if name in self._indexed:
            return
        key_field = key_field or self.key_field
        assert self.client is not None
        collection = self.client[self.database_name][name]
        try:
            collection.create_index([(key_field, pymongo.ASCENDING)], unique=True)
            collection.create_index([("_fetched_at", pymongo.ASCENDING)])
        except OperationFailure as exc:
            if is_transient(exc):
                raise
            # Writing goes on: upserts keyed on the field still avoid most duplicates.
            hint = (
                " (existing documents share a value; remove the duplicates or choose "
                "another key with the spider's item_key_field)"
                if exc.code == DUPLICATE_KEY or "unique" in str(exc).lower()
                else ""
            )
            logger.error(
                "cannot create the unique index on %s.%s.%s: %s%s",
                self.database_name,
                name,
                key_field,
                exc.details.get("errmsg", exc) if exc.details else exc,
                hint,
            )
        self._indexed.add(name)

    def _spill(self, docs: list[dict[str, Any]], report: WriteReport) -> None:
        self.journal.spill(docs)
        report.spilled += len(docs)

    def _reject(self, doc: dict[str, Any], reason: str, report: WriteReport) -> None:
        key_field = self._key_of(doc)
        key = doc.get(key_field)
        if reason.startswith("missing its key field") and not self._key_hint_said:
            self._key_hint_said = True
            logger.warning(
                "items are stored keyed on %r and this one has no such field: set "
                "item_key_field on the spider or the item class to the field that "
                "identifies an item (scrapy-redis projects often use 'link' or 'id')",
                key_field,
            )
        self.rejected_path.parent.mkdir(parents=True, exist_ok=True)
        keep_rejected(self.rejected_path, doc, key, reason, report)
