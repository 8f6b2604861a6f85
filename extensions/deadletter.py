"""The dead-letter list ``NAME:dlq``: what failed for good, with the reason.

Each record is one JSON object with at least ``url``, ``error``, ``kind``,
``node`` and ``time``; a person can list, replay or purge them
(``scrapy dlq NAME list|replay|purge``). Kinds:

* ``retries_exhausted``: a request that still failed after its last retry; also
  ``method``, ``fingerprint``, ``status``, ``retry_times``, ``first_failure``,
  ``last_failure`` and ``request`` (the stored request, for replay);
* ``start_url``: a start URL entry that is not a fetchable URL;
* ``unserializable``: a request holding something JSON cannot carry;
* ``unreadable``: a queue entry that is not a request (``raw`` holds it).
"""

from __future__ import annotations

import json
import logging
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import redis

logger = logging.getLogger(__name__)

# meta keys of a failed request that a replay resets, so it gets fresh retries
FRESH_RETRY_DROPS = ("retry_times", "retry_first_failure", "delay_until", "_dead_lettered")


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

    def replay(self, requests_key: str, limit: int | None = None) -> tuple[int, int]:
        """Put the oldest ``limit`` replayable records back in the queue with fresh
        retries. Returns (replayed, left because they hold no request)."""
        chosen: list[tuple[bytes, dict[str, Any]]] = []
        unreplayable = 0
        for raw in reversed(self.server.lrange(self.key, 0, -1)):  # oldest first
            record = json.loads(raw)
            if not record.get("request"):
                unreplayable += 1
            elif limit is None or len(chosen) < limit:
                chosen.append((raw, json.loads(record["request"])))
        pipe = self.server.pipeline(transaction=True)
        for raw, request in chosen:
            meta = request.get("meta", {})
            for key in FRESH_RETRY_DROPS:
                meta.pop(key, None)
            if not meta:
                request.pop("meta", None)
            data = json.dumps(request, separators=(",", ":"))
            pipe.zadd(requests_key, {data: -int(request.get("priority", 0))})
            pipe.lrem(self.key, -1, raw)
        pipe.execute()
        return len(chosen), unreplayable

    def purge(self) -> int:
        pipe = self.server.pipeline(transaction=True)
        pipe.llen(self.key)
        pipe.delete(self.key)
        count, _ = pipe.execute()
        return int(count)
