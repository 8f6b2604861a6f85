"""Per-page recrawl state in MongoDB, for crawls too large to keep it in Redis.

With ``RECRAWL_STORE = "mongo"`` (the default when ``MONGO_URI`` is set), a
fetched page's revisit record goes to the collection ``NAME_status`` instead of
``NAME:revisit``/``NAME:due``: one document per page, keyed on its request
fingerprint, with its URL, group, last fetch time, next fetch time (``due``,
indexed) and the request to fetch again. Redis then holds only the pages moved
from there into the queue, marked in ``NAME:revisit`` until their new status is
stored.

The feeder moves due pages in three steps, each safe to die after:

1. **claim** a batch: its ``due`` is pushed ``RECRAWL_CLAIM_TIMEOUT`` ahead with
   a token, so no other node takes it meanwhile (and a node dying here leaves
   the pages due again after that time);
2. **queue** them in Redis (``recrawl_requeue.lua``), each marked as it goes: a
   page still marked from an earlier claim is not queued twice;
3. **mark** them queued in MongoDB (``due`` null), if the token is still theirs.

A page fetched again has its new status written (and its ``claim`` dropped)
before its lease is released with its mark, so a node dying between the two
leaves it leased: it is fetched and stored again.

Runs in worker threads: the reactor never waits on MongoDB.
"""

from __future__ import annotations

import logging
import re
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from extensions import clock
from extensions.connection import mongo_client
from extensions.recrawl.records import RecrawlSchedule, revisit_request

if TYPE_CHECKING:
    import pymongo

    from extensions.recrawl.redisstore import RecrawlStore

logger = logging.getLogger(__name__)

HOUR = 3600.0
STORES = ("auto", "redis", "mongo")


def store_kind(settings: Any) -> str:
    """ "redis" or "mongo": where this crawl keeps its pages' recrawl state."""
    kind = settings.get("RECRAWL_STORE") or "auto"
    if kind == "auto":
        return "mongo" if settings.get("MONGO_URI") else "redis"
    return kind


@dataclass
class Claim:
    token: str
    #: (fingerprint in hex, group, request JSON)
    pages: list[tuple[str, str, bytes]]
    #: every document won, the malformed ones too (marked with the others)
    ids: list[str]


class MongoStatusStore:
    def __init__(
        self,
        uri: str,
        database: str,
        collection: str,
        node_id: str = "",
        server_selection_timeout: float = 5.0,
    ):
        self.client: pymongo.MongoClient = mongo_client(uri, server_selection_timeout)
        self.collection = self.client[database][collection]
        self.node_id = node_id
        self._indexed = False

    @classmethod
    def from_settings(cls, settings: Any, name: str, node_id: str = "") -> MongoStatusStore:

        uri = settings.get("MONGO_URI")
        if not uri:
            raise ValueError('RECRAWL_STORE = "mongo" needs MONGO_URI')
        database = settings.get("MONGO_DATABASE")
        return cls(uri, database, f"{name}_status", node_id)

    def describe(self) -> str:
        return f"MongoDB {self.collection.database.name}.{self.collection.name}"

    def ensure_indexes(self) -> None:
        if not self._indexed:
            self.collection.create_index([("due", 1)])
            self._indexed = True

    def close(self) -> None:
        self.client.close()

    # --- a node's side -----------------------------------------------------------

    def write(self, entries: list[tuple[str, str, float, bytes]]) -> None:
        """Store (fingerprint in hex, group, due time in seconds, request JSON)
        revisit records, one document per page, replacing its claim if any."""
        from pymongo import UpdateOne

        if not entries:
            return
        self.ensure_indexes()
        operations = []
        for fingerprint, group, due, data in entries:
            url, fetched_at, interval = revisit_request(data) or ("", None, None)
            fields = {"url": url, "group": group, "due": due, "fetched_at": fetched_at,
                      "interval": interval, "request": data.decode("utf-8")}  # fmt: skip
            operations.append(
                UpdateOne(
                    {"_id": fingerprint}, {"$set": fields, "$unset": {"claim": ""}}, upsert=True
                )
            )
        self.collection.bulk_write(operations, ordered=False)

    def claim(self, limit: int, hold: float, now: float | None = None) -> Claim:
        """Take up to ``limit`` due pages for ``hold`` seconds."""
        now = clock.now() if now is None else now
        # no index made here: a crawl that keeps no page for a recrawl gets no collection
        found = self.collection.find({"due": {"$lte": now}}, {"_id": 1}).sort("due", 1)
        ids = [doc["_id"] for doc in found.limit(limit)]
        token = f"{self.node_id}:{uuid.uuid4().hex}"
        if not ids:
            return Claim(token, [], [])
        self.collection.update_many(
            {"_id": {"$in": ids}, "due": {"$lte": now}},
            {"$set": {"due": now + hold, "claim": token}},
        )
        won = list(
            self.collection.find({"_id": {"$in": ids}, "claim": token}, {"group": 1, "request": 1})
        )
        pages = [page for page in map(_page, won) if page is not None]
        return Claim(token, pages, [doc["_id"] for doc in won])

    def mark_queued(self, claim: Claim) -> None:
        """The claimed pages are in the queue: none is due until fetched again."""
        if claim.ids:
            self.collection.update_many(
                {"_id": {"$in": claim.ids}, "claim": claim.token},
                {"$set": {"due": None}, "$unset": {"claim": ""}},
            )

    def feed(self, kept: RecrawlStore, limit: int, hold: float) -> int:
        """Claim due pages, queue them, mark them queued: how many were queued."""
        claim = self.claim(limit, hold)
        queued = kept.requeue(claim.pages) if claim.pages else 0
        self.mark_queued(claim)
        return queued

    def lastmod(self, entries: list[tuple[str, str, float]]) -> tuple[int, int]:
        """``RecrawlStore.lastmod`` for pages kept here: (fingerprint in hex, group,
        lastmod) entries; a page changed since its last fetch is due now, one
        unchanged has its recrawl put off by its interval; pages queued (due
        null) are left alone. Returns (made due, put off)."""
        from pymongo import UpdateOne

        now = clock.now()
        wanted = {fingerprint: modified for fingerprint, _, modified in entries}
        found = self.collection.find(
            {"_id": {"$in": list(wanted)}, "due": {"$ne": None}},
            {"fetched_at": 1, "interval": 1},
        )
        sooner, later = [], []
        for doc in found:
            fetched_at, interval = doc.get("fetched_at"), doc.get("interval")
            if not isinstance(fetched_at, (int, float)):
                continue
            if wanted[doc["_id"]] > fetched_at:
                sooner.append(UpdateOne({"_id": doc["_id"], "due": {"$gt": now}},
                                        {"$set": {"due": now}}))  # fmt: skip
            elif isinstance(interval, (int, float)) and interval > 0:
                off = now + interval
                later.append(UpdateOne({"_id": doc["_id"], "due": {"$ne": None, "$lt": off}},
                                       {"$set": {"due": off}}))  # fmt: skip
        moved = [
            self.collection.bulk_write(ops, ordered=False).modified_count if ops else 0
            for ops in (sooner, later)
        ]
        return moved[0], moved[1]

    # --- by hand ---------------------------------------------------------------

    def recrawl_schedule(self, hours: int = 24, now: float | None = None) -> RecrawlSchedule:
        now = clock.now() if now is None else now
        count = self.collection.count_documents
        return RecrawlSchedule(
            pages=self.collection.estimated_document_count(),  # a count, not a scan
            due=count({"due": {"$lte": now}}),
            due_by_hour=[
                count({"due": {"$gt": now + hour * HOUR, "$lte": now + (hour + 1) * HOUR}})
                for hour in range(hours)
            ],
        )

    def make_due(
        self, match: re.Pattern | None, older_than: float | None, limit: int | None
    ) -> int:
        """Pages waiting for their date whose URL matches and whose last fetch
        is before ``older_than``: due now. Returns how many."""
        now = clock.now()
        # waiting for a later date: neither queued (null) nor due already
        query: dict[str, Any] = {"due": {"$gt": now}}
        if match is not None:
            query["url"] = {"$regex": match.pattern}
        if older_than is not None:
            query["fetched_at"] = {"$lt": older_than}
        found = self.collection.find(query, {"_id": 1})
        ids = [doc["_id"] for doc in (found.limit(limit) if limit else found)]
        made = 0
        for start in range(0, len(ids), 1000):
            result = self.collection.update_many(
                {"_id": {"$in": ids[start : start + 1000]}, "due": {"$gt": now}},
                {"$set": {"due": now}},
            )
            made += result.modified_count
        return made


def _page(doc: dict[str, Any]) -> tuple[str, str, bytes] | None:
    """A claimed document as a page to queue, or None if it is not one (anyone
    who can write to the database can write there)."""
    fingerprint, group, request = doc.get("_id"), doc.get("group"), doc.get("request")
    strings = isinstance(fingerprint, str) and isinstance(group, str) and isinstance(request, str)
    if strings and fingerprint and group and request:
        return fingerprint, group, request.encode("utf-8")
    logger.warning("skipping a malformed recrawl status document %r", fingerprint)
    return None
