"""The dead-letter list ``NAME:dlq``: what failed for good, with the reason.

Each record is one JSON object with at least ``url``, ``error``, ``kind``,
``node`` and ``time``; a person can list, replay or purge them.
"""

from __future__ import annotations

import json
import logging
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import redis

logger = logging.getLogger(__name__)


class DeadLetters:
    def __init__(self, server: redis.Redis, key: str, node_id: str):
        self.server = server
        self.key = key
        self.node_id = node_id

    def add(self, *, kind: str, url: str, error: str, **extra: Any) -> None:
        record = {
            "kind": kind,
            "url": url,
            "error": error,
            "node": self.node_id,
            "time": time.time(),
            **extra,
        }
        self.server.lpush(self.key, json.dumps(record, default=repr))

    def records(self, limit: int | None = None) -> list[dict[str, Any]]:
        end = -1 if limit is None else limit - 1
        return [json.loads(raw) for raw in self.server.lrange(self.key, 0, end)]
