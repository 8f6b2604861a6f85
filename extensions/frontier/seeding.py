"""Start entries from a person (``scrapy seed``, the console): checked as a node
would check them, then pushed to the spider's start list in batches."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from extensions.exceptions import InvalidStartURL
from extensions.frontier.redisops import push_start_entries
from extensions.frontier.start_urls import EntryRules, parse_entry
from extensions.urlpolicy import mask_credentials

if TYPE_CHECKING:
    import redis

    from extensions.keys import SpiderKeys

PUSH_BATCH = 1000  # entries per round trip
WAIT_STEP = 0.5  # seconds between looks at the start list while it is full
WAIT_REPORT = 30.0  # seconds between two "waiting for the nodes" lines


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


def push(
    server: redis.Redis,
    keys: SpiderKeys,
    valid: list[str],
    score: float = 0.0,
    *,
    most_waiting: int = 0,
    waiting_for_nodes: Callable[[int, int], object] = lambda waiting, left: None,
) -> None:
    """Push the entries in batches; with ``most_waiting``, keep at most that many
    in the start list, pushing more as the nodes take them (``waiting_for_nodes``
    is told, every WAIT_REPORT seconds, how many wait there and how many are left)."""
    start = 0
    said = time.monotonic()
    while start < len(valid):
        count = PUSH_BATCH
        if most_waiting:
            count = min(count, most_waiting - start_size(server, keys))
            if count <= 0:
                if time.monotonic() - said >= WAIT_REPORT:
                    said = time.monotonic()
                    waiting_for_nodes(start_size(server, keys), len(valid) - start)
                time.sleep(WAIT_STEP)
                continue
        push_start_entries(server, keys, valid[start : start + count], score=score)
        start += count


def start_size(server: redis.Redis, keys: SpiderKeys) -> int:
    size = {"list": server.llen, "set": server.scard, "zset": server.zcard}[keys.start_type]
    return int(size(keys.start_urls))


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
