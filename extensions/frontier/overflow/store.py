"""The part of the frontier kept in MongoDB (``FRONTIER_OVERFLOW = "mongo"``).

One document per trip a request took out of Redis, in the collection
``NAME_frontier``: ``_id`` "EPOCH GROUP ID LIFE" (LIFE numbers the trips: a request
refilled may go out again before its last document is marked taken), ``e`` the
crawl's epoch, ``g`` the group, ``s`` its order (priority, then discovery: lower
first), ``r`` the request's JSON and ``t`` when a refill took it back (null while
it waits). The index (e, g, t, s) serves the refill: a group's waiting requests,
best first. The epoch is the crawl's in Redis (``overflow_epoch`` in NAME:frontier):
a crawl wiped from Redis and begun again numbers its requests from 1 again, and
must neither read nor collide with the documents of the one before.

A document is inserted once: writing a batch again (a node died after the
write and before Redis heard of it) finds its _ids taken and changes nothing, and a
request taken back is kept as a tombstone (``t`` set) for ``TOMBSTONE_HOURS``:
a late copy of its trip's spill finds it and does not bring it back to life. Anyone
who can write to the database can write there: a document that is not a
request is dead-lettered with its reason, never queued.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from extensions import clock
from extensions.connection import mongo_client

logger = logging.getLogger(__name__)

#: how long a request taken back stays as a tombstone; far longer than a node
#: takes to be declared dead, after which its unfinished spill is written again
TOMBSTONE_HOURS = 1.0
DUPLICATE_KEY = 11000


@dataclass(frozen=True)
class SpillRecord:
    """A request on its way to MongoDB, as the scripts wrote it to NAME:spill."""

    group: str
    id: str
    life: str
    order: int
    request: str

    def document(self, epoch: str) -> dict[str, Any]:
        return {
            "_id": f"{epoch} {self.group} {self.id} {self.life}",
            "e": epoch, "g": self.group, "s": self.order, "r": self.request, "t": None,
        }  # fmt: skip

    @classmethod
    def parse(cls, raw: bytes) -> SpillRecord | None:
        """The record, or None if it is not one (another writer's)."""
        try:
            group, ident, life, order, request = raw.decode("utf-8").split("\n", 4)
            number = int(order)
        except ValueError:  # UnicodeDecodeError is one
            return None
        if not group or " " in group or not (ident.isdigit() and life.isdigit()) or not request:
            return None
        return cls(group, ident, life, number, request)


@dataclass(frozen=True)
class Waiting:
    """A group's requests read back from MongoDB, best first."""

    #: (id, life, order, request JSON), the order as text for the script
    requests: list[tuple[str, str, str, str]]
    #: (id, life, why) of documents of the group's that are not requests (their
    #: _id is "EPOCH GROUP ID LIFE": they count as the group's, and are dropped)
    malformed: list[tuple[str, str, str]]
    #: (_id, why) of documents that are not even the group's: marked taken alone
    foreign: list[tuple[Any, str]]


class MongoOverflow:
    def __init__(self, uri: str, database: str, collection: str, timeout: float = 5.0):
        self.client = mongo_client(uri, timeout)
        self.collection = self.client[database][collection]
        self._indexed = False
        #: the crawl's epoch (Overflow sets it from Redis): every document is one's
        self.epoch = ""

    @classmethod
    def from_settings(cls, settings: Any, name: str) -> MongoOverflow:
        uri = settings.get("MONGO_URI")
        if not uri:
            raise ValueError('FRONTIER_OVERFLOW = "mongo" needs MONGO_URI')
        return cls(uri, settings.get("MONGO_DATABASE"), f"{name}_frontier")

    def describe(self) -> str:
        return f"MongoDB {self.collection.database.name}.{self.collection.name}"

    def ensure_indexes(self) -> None:
        if not self._indexed:
            self.collection.create_index([("e", 1), ("g", 1), ("t", 1), ("s", 1)])
            self.collection.create_index([("t", 1)])  # the tombstones' sweep
            self._indexed = True

    def close(self) -> None:
        self.client.close()

    def write(self, records: list[SpillRecord]) -> None:
        """Store requests on their way out of Redis; one written before stays as it
        is (an insert that finds its _id taken is what a second write of a batch
        gets, and is not an error: inserts are several times as fast as upserts)."""
        from pymongo.errors import BulkWriteError

        if not records:
            return
        self.ensure_indexes()
        documents = [record.document(self.epoch) for record in records]
        try:
            self.collection.insert_many(documents, ordered=False)
        except BulkWriteError as exc:
            errors = exc.details.get("writeErrors", [])
            if exc.details.get("writeConcernErrors") or any(
                error.get("code") != DUPLICATE_KEY for error in errors
            ):
                raise

    def waiting(self, group: str, limit: int, below: int | None) -> Waiting:
        """Up to ``limit`` of the group's waiting requests, best first; with
        ``below``, only those whose order is better (the rest of the group's
        requests on their way may be better than the others)."""
        query: dict[str, Any] = {"e": self.epoch, "g": group, "t": None}
        if below is not None:
            query["s"] = {"$lt": below}
        found = self.collection.find(query).sort("s", 1).limit(limit)
        requests: list[tuple[str, str, str, str]] = []
        malformed: list[tuple[str, str, str]] = []
        foreign: list[tuple[Any, str]] = []
        for doc in found:
            doc_id = doc.get("_id")
            ident, life = _id_parts(doc_id, f"{self.epoch} {group} ")
            order, request = doc.get("s"), doc.get("r")
            if not ident:
                foreign.append((doc_id, "its _id is not 'EPOCH GROUP ID LIFE'"))
            elif not isinstance(order, int) or isinstance(order, bool):
                malformed.append((ident, life, "its order (s) is not a whole number"))
            elif not isinstance(request, str) or not request:
                malformed.append((ident, life, "its request (r) is not JSON text"))
            else:
                requests.append((ident, life, str(order), request))
        return Waiting(requests, malformed, foreign)

    def mark_taken(
        self, group: str, lives: list[tuple[str, str]], now: float | None = None
    ) -> None:
        """The (id, life) trips are over, back in Redis: tombstones from now on."""
        ids = [f"{self.epoch} {group} {ident} {life}" for ident, life in lives]
        self.mark_documents(ids, now)

    def mark_documents(self, doc_ids: list[Any], now: float | None = None) -> None:
        if doc_ids:
            self.collection.update_many(
                {"_id": {"$in": doc_ids}}, {"$set": {"t": clock.now() if now is None else now}}
            )

    def sweep(self, now: float | None = None) -> int:
        """Drop tombstones older than TOMBSTONE_HOURS; how many."""
        before = (clock.now() if now is None else now) - TOMBSTONE_HOURS * 3600
        return self.collection.delete_many({"t": {"$lt": before}}).deleted_count

    def waiting_count(self, group: str | None = None) -> int:
        """Requests waiting in MongoDB (of one group): a count, for status and tests."""
        # $eq: nx-27017 counts nothing for a bare null (MongoDB takes both alike)
        query: dict[str, Any] = {"e": self.epoch, "t": {"$eq": None}}
        if group is not None:
            query["g"] = group
        return self.collection.count_documents(query)

    def drop_other_epochs(self) -> int:
        """Delete what crawls wiped from Redis before this one left: how many."""
        return self.collection.delete_many({"e": {"$ne": self.epoch}}).deleted_count


def _id_parts(doc_id: Any, prefix: str) -> tuple[str, str]:
    """(id, life) of a document whose _id is ``prefix`` (epoch and group) ID LIFE,
    or ("", "") if it is not one."""
    if not isinstance(doc_id, str) or not doc_id.startswith(prefix):
        return "", ""
    ident, _, life = doc_id[len(prefix) :].partition(" ")
    if ident.isdigit() and life.isdigit():
        return ident, life
    return "", ""
