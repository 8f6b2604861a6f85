"""What MongoDB is asked, document by document: the write one item becomes (an
upsert keyed on its key field, or an insert), the digest that tells a changed
item from the same one stored again, and which server errors mean "try again".
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Collection
from typing import Any

import bson
from pymongo import InsertOne, UpdateOne
from pymongo.errors import (
    ConnectionFailure,
    ExecutionTimeout,
    InvalidDocument,
    OperationFailure,
    PyMongoError,
    WaitQueueTimeoutError,
    WTimeoutError,
)

from extensions.pipelines.documents import KEY_FIELD

MAX_DOCUMENT_BYTES = 16 * 1024 * 1024
DUPLICATE_KEY = 11000
# Server error codes that mean "try again": not primary, shutting down,
# stepping down, network trouble, time limits.
TRANSIENT_CODES = {6, 7, 89, 91, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436}
WRITE_MODES = ("upsert", "insert")
CHANGED_AT = "_changed_at"  # when the item's fields last changed
CONTENT_HASH = "_content_hash"  # of the item's own fields, to tell a change
# Fields the store sets itself: an item's own value for them is not written.
_STORE_FIELDS = frozenset(
    {"_id", "_collection", KEY_FIELD, "_first_seen", CHANGED_AT, CONTENT_HASH}
)


def content_hash(doc: dict[str, Any], ignored: Collection[str] = ()) -> str:
    """A digest of the item's own fields (not those starting with ``_``, which
    the crawl sets, nor the ``ignored`` ones, such as the spider's own fetch
    time), stable across nodes and field order."""
    fields = {k: doc[k] for k in sorted(doc) if not k.startswith("_") and k not in ignored}
    try:
        encoded = bson.encode(fields)
    except (InvalidDocument, TypeError, ValueError, OverflowError):
        encoded = repr(fields).encode()  # the write will reject it with the reason
    return hashlib.sha1(encoded).hexdigest()[:20]


class RefusedForNow(PyMongoError):
    """Documents MongoDB kept asking to write again (upsert contention, a transient
    code per document) until the retry time ran out: the batch goes to the journal."""


def is_transient(exc: BaseException) -> bool:
    transient = (ConnectionFailure, ExecutionTimeout, WTimeoutError, WaitQueueTimeoutError)
    if isinstance(exc, (*transient, RefusedForNow)):
        return True
    if isinstance(exc, PyMongoError) and exc.has_error_label("RetryableWriteError"):
        return True
    return isinstance(exc, OperationFailure) and exc.code in TRANSIENT_CODES


def write_of(
    doc: dict[str, Any], key_field: str, digest: str, now: dt.datetime, mode: str, ident: str
) -> InsertOne | UpdateOne:
    """The bulk-write operation storing ``doc`` as ``_id`` ``ident`` (its item id,
    ``documents.item_id``, when first stored): fields the store sets itself are
    the store's, whatever the item says of them."""
    fields = {k: v for k, v in doc.items() if k not in _STORE_FIELDS}
    fields[CONTENT_HASH] = digest
    if mode == "insert":
        return InsertOne(
            {"_id": ident, **fields, "_first_seen": now, "_updated_at": now, CHANGED_AT: now}
        )
    fields["_updated_at"] = now
    return UpdateOne(
        {key_field: doc[key_field]},
        {"$set": fields, "$setOnInsert": {"_id": ident, "_first_seen": now, CHANGED_AT: now}},
        upsert=True,
    )
