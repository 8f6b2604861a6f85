"""The dead-letter list ``NAME:dlq``: what failed for good, with the reason.

Each record is one JSON object with at least ``url``, ``error``, ``kind``,
``node`` and ``time``; a person can list, replay or purge them
(``scrapy dlq NAME list|replay|purge``). Kinds:

* ``retries_exhausted``: a request that still failed after its last retry; also
  ``method``, ``fingerprint``, ``status``, ``retry_times``, ``first_failure``,
  ``last_failure`` and ``request`` (the stored request, for replay);
* ``start_url``: a start URL entry that is not a fetchable URL;
* ``unserializable``: a request holding something JSON cannot carry;
* ``unreadable``: a queue entry that is not a request (``raw`` holds it);
* ``banned``: a request its host kept answering with a ban (``BAN_RETRY_TIMES``),
  with the same fields as ``retries_exhausted``;
* ``no_address``: with CLUSTER_IP_RATE, a request whose host has no address
  (NXDOMAIN, no A or AAAA, refused by DENY_PRIVATE_NETWORKS, or lookups that kept
  failing), never fetched; ``request`` holds it for replay.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from extensions import clock
from extensions.crawlid import crawl_fields
from extensions.exceptions import SerializationError
from extensions.frontier.groups import queue_group_for
from extensions.frontier.leased import leased_for
from extensions.frontier.redisops import execute
from extensions.frontier.serializer import dumps_request, entry_problem
from extensions.meta import CRAWL_ID, DEAD_LETTERED

if TYPE_CHECKING:
    import redis
    from redis.client import Pipeline
    from scrapy import Request
    from scrapy.crawler import Crawler

    from extensions.frontier.frontier import Frontier

logger = logging.getLogger(__name__)

#: which records an action takes: (the record as stored, as parsed or None)
Selection = Callable[[bytes, "dict[str, Any] | None"], bool]

# meta keys of a failed request that a replay resets, so it gets fresh retries
FRESH_RETRY_DROPS = ("retry_times", "retry_first_failure", "delay_until", "_dead_lettered")


def parse_record(raw: bytes | str) -> dict[str, Any] | None:
    """A dead-letter record, or None if it is not one (anyone who can write to
    Redis can write to the list)."""
    try:
        record = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return record if isinstance(record, dict) else None


class DeadLetters:
    def __init__(self, server: redis.Redis, key: str, node_id: str):
        self.server = server
        self.key = key
        self.node_id = node_id
        # NAME:crawl:ID sits next to NAME:dlq (keys.CRAWL)
        self.crawl_prefix = key.removesuffix("dlq") + "crawl:"

    def add(
        self, *, kind: str, url: str, error: str, pipe: Pipeline | None = None, **extra: Any
    ) -> None:
        record = {
            "kind": kind,
            "url": url,
            "error": error,
            "node": self.node_id,
            "time": clock.now(),
            **extra,
        }
        target = pipe or self.server
        target.lpush(self.key, json.dumps(record, default=repr))
        crawl = crawl_fields(extra.get("crawl")).get("crawl")
        if crawl:
            target.hincrby(self.crawl_prefix + crawl, "dlq", 1)

    def add_request(
        self,
        crawler: Crawler,
        request: Request,
        *,
        kind: str,
        error: str,
        status: int | None,
        first: float,
        last: float,
    ) -> None:
        """Dead-letter a request that failed for good, stored as it was leased
        (so a replay fetches it with a fresh identity), and mark it so the
        scheduler counts it as failed, not done. Raises RedisError."""
        replayable = request.copy()
        leased_for(crawler).drop_downloader_headers(request, replayable)
        try:
            stored = dumps_request(replayable, crawler.spider).decode()
        except SerializationError:
            stored = None  # still listed, just not replayable
        request.meta[DEAD_LETTERED] = True
        logger.warning("gave up on %s: %s (dead-lettered)", request.url[:200], error[:300])
        self.add(
            kind=kind,
            url=request.url,
            error=error,
            method=request.method,
            fingerprint=crawler.request_fingerprinter.fingerprint(request).hex(),
            status=status,
            retry_times=request.meta.get("retry_times", 0),
            first_failure=first,
            last_failure=last,
            request=stored,
            **crawl_fields(request.meta.get(CRAWL_ID)),
        )

    def records(self, limit: int | None = None) -> tuple[list[dict[str, Any]], int]:
        """The newest ``limit`` records, and how many of those were malformed (skipped)."""
        end = -1 if limit is None else limit - 1
        records, malformed = [], 0
        for raw in self.server.lrange(self.key, 0, end):
            record = parse_record(raw)
            if record is None:
                malformed += 1
            else:
                records.append(record)
        return records, malformed

    def replay(
        self,
        frontier: Frontier,
        queue_by: str,
        limit: int | None = None,
        select: Selection | None = None,
        scan: int | None = None,
    ) -> tuple[int, int]:
        """Put the oldest ``limit`` replayable records back in the queue with fresh
        retries: of the newest ``scan`` records (all by default), those ``select``
        accepts (all by default). Returns (replayed, left because they hold no
        valid request).

        A stored request is checked as a node would check it before it goes
        back: a record is data anyone who can write to Redis may have written.
        """
        chosen: list[tuple[bytes, dict[str, Any]]] = []
        unreplayable = 0
        for raw in reversed(self._newest(scan)):  # oldest first
            record = parse_record(raw)
            if select is not None and not select(raw, record):
                continue
            request = _stored_request(record)
            if request is None or entry_problem(request) is not None:
                unreplayable += 1
            elif limit is None or len(chosen) < limit:
                chosen.append((raw, request))
        # Sharded, the queues and the list live in different hash slots: the
        # requests are queued first, and only then do their records go.
        sharded = frontier.keys.shards > 1
        pipe = self.server.pipeline(transaction=not sharded)
        removals = self.server.pipeline(transaction=False) if sharded else pipe
        for raw, request in chosen:
            meta = request.get("meta", {})
            for key in FRESH_RETRY_DROPS:
                meta.pop(key, None)
            if not meta:
                request.pop("meta", None)
            data = json.dumps(request, separators=(",", ":")).encode()
            # into the queue of the crawl it came from
            group = queue_group_for(
                request["url"], meta if isinstance(meta, dict) else {}, queue_by
            )
            # dont_filter: it was seen, and is to be fetched again
            frontier.enqueue_on(pipe, [("", group, int(request.get("priority", 0)), data)])
            removals.lrem(self.key, -1, raw)  # type: ignore[arg-type]  # bytes go as they are
        execute(pipe)
        if sharded:
            removals.execute()
        return len(chosen), unreplayable

    def delete(self, select: Selection, scan: int | None = None) -> int:
        """Delete the records ``select`` accepts among the newest ``scan``."""
        chosen = [raw for raw in self._newest(scan) if select(raw, parse_record(raw))]
        if not chosen:
            return 0
        pipe = self.server.pipeline(transaction=True)
        for raw in chosen:
            pipe.lrem(self.key, 1, raw)  # type: ignore[arg-type]  # bytes go as they are
        return sum(int(n) for n in pipe.execute())

    def _newest(self, scan: int | None) -> list[bytes]:
        found: Any = self.server.lrange(self.key, 0, -1 if scan is None else scan - 1)
        return found

    def purge(self) -> int:
        pipe = self.server.pipeline(transaction=True)
        pipe.llen(self.key)
        pipe.delete(self.key)
        count, _ = pipe.execute()
        return int(count)


def _stored_request(record: dict[str, Any] | None) -> dict[str, Any] | None:
    stored = record.get("request") if record else None
    if not isinstance(stored, str):
        return None
    try:
        request = json.loads(stored)
    except (ValueError, RecursionError):
        return None
    return request if isinstance(request, dict) else None
