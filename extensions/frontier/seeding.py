"""Start entries from a person (``scrapy seed``, the console): checked as a node
would check them, then pushed to the spider's start list in batches."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from extensions.exceptions import InvalidStartURL
from extensions.frontier.redisops import push_start_entries
from extensions.frontier.start_urls import EntryRules, parse_entry
from extensions.urlpolicy import mask_credentials

if TYPE_CHECKING:
    import redis

    from extensions.keys import SpiderKeys

PUSH_BATCH = 1000  # entries per round trip


def validate(entries: list[str], rules: EntryRules) -> tuple[list[str], list[tuple[str, str]]]:
    """The entries a node would take, and the others with the reason (their
    credentials masked): what ``scrapy seed`` and the console push."""
    valid: list[str] = []
    refused: list[tuple[str, str]] = []
    for entry in entries:
        try:
            parse_entry(entry, rules)
        except InvalidStartURL as exc:
            refused.append((mask_credentials(entry), str(exc)))
        else:
            valid.append(entry.strip())
    return valid, refused


def push(server: redis.Redis, keys: SpiderKeys, valid: list[str], score: float = 0.0) -> None:
    for start in range(0, len(valid), PUSH_BATCH):
        push_start_entries(server, keys, valid[start : start + PUSH_BATCH], score=score)


def with_field(entry: str, key: str, value: object, *, keep: bool = False) -> str:
    """A URL, or a JSON entry, with ``key`` set to ``value`` (``keep``: unless the
    entry sets it itself)."""
    text = entry.strip()
    if not text.startswith("{"):
        return json.dumps({"url": text, key: value})
    try:
        data = json.loads(text)
    except ValueError:
        return text  # refused, with the reason, when checked
    if not isinstance(data, dict) or (keep and key in data):
        return text
    return json.dumps({**data, key: value})
