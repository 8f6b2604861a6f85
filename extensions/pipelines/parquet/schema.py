"""The crawl's Parquet schema: one Arrow type per item field, the same for every
node and every file, kept in ``NAME:parquet:schema``.

A field's type is set by the first value the crawl stores in it (a string, a
whole number, a fractional one, a boolean, a moment, bytes; a list or a dict is
kept as its JSON text). The one change allowed later is a whole-number field
that meets a fractional number: it becomes a double (files written before keep
``int64``, which DuckDB's ``union_by_name`` and pyarrow's ``permissive``
promotion read as double). Any other value of another type than its field's is
refused with the reason, and the item goes to the rejected items: a column
holds one type, or readers cannot read the files as one dataset.

Values are checked and put in their spool form here: what a node spools is
already what the file will hold.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from typing import Any

import redis

#: the types a field may have, as the schema hash names them
TYPES = ("string", "int64", "double", "bool", "timestamp", "binary", "json")
INT64 = (-(2**63), 2**63 - 1)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


class ValueProblem(ValueError):
    """A value the crawl's Parquet schema cannot hold (the reason is the message)."""


def type_of(value: Any) -> str:
    """The type a field's first value gives it."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "double"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dt.datetime):
        return "timestamp"
    if isinstance(value, bytes | bytearray):
        return "binary"
    if isinstance(value, dict | list | tuple):
        return "json"
    raise ValueProblem(
        f"a {type(value).__name__} has no Parquet type (store it as text or a number)"
    )


def spooled(value: Any, kind: str) -> Any:
    """``value`` in its spool form for a field of type ``kind`` (JSON-safe:
    moments as microseconds since 1970, bytes as base64). Raises ValueProblem."""
    if value is None:
        return None
    own = type_of(value)
    if kind == "json":
        try:
            return json.dumps(value, ensure_ascii=False, allow_nan=False, sort_keys=True)
        except (TypeError, ValueError, RecursionError) as exc:
            raise ValueProblem(f"not encodable as JSON: {exc}") from None
    if own == kind or (own == "int64" and kind == "double"):
        if own == "int64" and not INT64[0] <= value <= INT64[1]:
            raise ValueProblem(f"{value} is out of the int64 range")
        if kind == "double":
            return float(value)
        if kind == "timestamp":
            moment = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
            return (moment - _EPOCH) // dt.timedelta(microseconds=1)
        if kind == "binary":
            return base64.b64encode(bytes(value)).decode("ascii")
        return value
    raise ValueProblem(f"holds a {own} where the crawl's Parquet files have {kind}")


class CrawlSchema:
    """The field types of a crawl's Parquet files, shared through Redis: the first
    node to store a field sets its type (HSETNX); the others read it."""

    def __init__(self, server: redis.Redis, key: str):
        self.server = server
        self.key = key
        self.types: dict[str, str] = {}

    def load(self) -> None:
        found = self.server.hgetall(self.key)
        self.types = {
            (k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
            for k, v in found.items()
        }
        bad = {name: kind for name, kind in self.types.items() if kind not in TYPES}
        if bad:
            # another writer's value: not a type these files can have
            raise ValueProblem(f"{self.key} holds types no Parquet file can have: {bad!r:.200}")

    def learn(self, docs: list[dict[str, Any]]) -> None:
        """Give the fields these documents bring first their types, cluster-wide.
        Raises redis.RedisError."""
        new: dict[str, str] = {}
        widen: list[str] = []
        for doc in docs:
            for name, value in doc.items():
                if value is None:
                    continue
                known = self.types.get(name) or new.get(name)
                try:
                    own = type_of(value)
                except ValueProblem:
                    continue  # the item is refused with the reason when spooled
                if known is None:
                    new[name] = own
                elif known == "int64" and own == "double" and name not in widen:
                    widen.append(name)
        if not new and not widen:
            return
        pipe = self.server.pipeline(transaction=False)
        for name, kind in new.items():
            pipe.hsetnx(self.key, name, kind)
        for name in widen:
            pipe.hset(self.key, name, "double")
        pipe.execute()
        self.load()

    def row(self, doc: dict[str, Any]) -> dict[str, Any]:
        """The document's spool row. Raises ValueProblem naming the field."""
        row = {}
        for name, value in doc.items():
            if value is None:
                continue
            try:
                # (a field no type is known for: its value's own, if Parquet has one)
                kind = self.types.get(name) or type_of(value)
                row[name] = spooled(value, kind)
            except ValueProblem as exc:
                raise ValueProblem(f"field {name!r}: {exc}") from None
        return row
