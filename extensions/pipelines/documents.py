"""Checks an item must pass before a store takes it, and a safe copy of a
rejected one for ``rejected.jsonl``; what a store's write reports.

MongoDB would silently reinterpret some items: a dotted field name becomes a
nested field, a ``$`` field an operator, a dict in the key field a query
filter; and it refuses documents nested more than 100 levels deep. Such items
are rejected with the reason instead of being changed or lost.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from extensions import clock

KEY_FIELD = "_key_field"  # set by the pipeline when the item class names its own key
MAX_NESTING = 100  # levels of nested documents and arrays MongoDB accepts
KEY_TYPES = (str, int, float, bool)


def _walk_problem(value: Any, depth: int, path: str, names: bool = True) -> str | None:
    if depth > MAX_NESTING:
        return f"nested more than {MAX_NESTING} levels deep (at {path[:200]})"
    if isinstance(value, dict):
        for key, element in value.items():
            if not isinstance(key, str):
                return f"field name {key!r:.80} at {path[:200]} is not a string"
            if names and ("." in key or key.startswith("$") or "\0" in key):
                return (
                    f"field name {key!r:.80} at {path[:200]} holds '.' or starts with '$', "
                    "which MongoDB would read as a path or an operator"
                )
            problem = _walk_problem(element, depth + 1, f"{path}.{key}", names)
            if problem:
                return problem
    elif isinstance(value, (list, tuple)):
        for index, element in enumerate(value):
            problem = _walk_problem(element, depth + 1, f"{path}[{index}]", names)
            if problem:
                return problem
    return None


def document_problem(
    doc: dict[str, Any], key_field: str | None = None, *, mongo_names: bool = True
) -> str | None:
    """Why a store must not take ``doc``, or None. ``mongo_names``: refuse field
    names MongoDB would reinterpret (a JSON Lines file takes them as they are)."""
    if key_field is not None:
        key = doc.get(key_field)
        if key in (None, ""):
            return f"missing its key field {key_field!r}"
        if not isinstance(key, KEY_TYPES):
            return (
                f"key field {key_field!r} holds a {type(key).__name__}; it must be a string "
                "or a number"
            )
    # Iterative over the top level so the path names start at the field.
    for name, value in doc.items():
        problem = _walk_problem({name: value}, 0, "item", mongo_names)
        if problem:
            return problem
    return None


def item_id(doc: dict[str, Any], key_field: str, collection: str) -> str:
    """The item's id, as every store names it (``_id``): a digest of its collection
    and its key field's value, the key MongoDB's store upserts on."""
    key = json.dumps(doc.get(doc.get(KEY_FIELD) or key_field), default=str)
    name = doc.get("_collection") or collection
    return hashlib.sha1(f"{name}\0{key}".encode()).hexdigest()[:24]


def printable(value: Any, depth: int = 0) -> Any:
    """A JSON-safe copy of ``value``, cut off past MAX_NESTING levels."""
    if depth > MAX_NESTING:
        return "…"
    if isinstance(value, dict):
        return {str(k): printable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [printable(v, depth + 1) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return repr(value)[:10_000]


COUNTED = ("written", "retried", "spilled", "replayed", "rejected", "duplicates", "changed")


@dataclass
class WriteReport:
    """What one ``write`` did; the pipeline adds it to the crawl's stats."""

    written: int = 0
    retried: int = 0
    spilled: int = 0
    replayed: int = 0
    rejected: int = 0
    duplicates: int = 0
    #: stored documents whose fields changed (their ``_changed_at`` moved)
    changed: int = 0
    #: (id of the rejected document object, why), so the pipeline can tell its item
    rejections: list[tuple[int, str]] = field(default_factory=list)

    def add(self, other: WriteReport) -> None:
        for name in COUNTED:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.rejections += other.rejections


def keep_rejected(
    path: Path, doc: dict[str, Any], key: Any, reason: str, report: WriteReport
) -> None:
    """Append a rejected item to ``path`` with the reason, durably."""
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "reason": reason,
        "key": printable(key, depth=MAX_NESTING - 1),
        "time": clock.now(),
        "item": printable(doc),
    }
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(record, ensure_ascii=False) + "\n")
        out.flush()
        os.fsync(out.fileno())
    report.rejected += 1
    report.rejections.append((id(doc), f"{reason}; kept in {path}"))
