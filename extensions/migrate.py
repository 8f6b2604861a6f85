"""Carry a scrapy-redis crawl in progress over (``scrapy migrate NAME``).

scrapy-redis keeps, under the same key names this crawler uses:

* ``NAME:requests``: the pending queue, pickled request dicts in a sorted set
  (its PriorityQueue) or a list (FifoQueue / LifoQueue);
* ``NAME:dupefilter``: a set of its own request fingerprints (hex SHA-1 of the
  method, canonical URL and body: not Scrapy's fingerprint);
* ``NAME:start_urls``: a list, or a set / sorted set with
  ``REDIS_START_URLS_AS_SET`` / ``_AS_ZSET``, which this crawler reads as they are.

Each foreign key is first renamed to ``NAME:migrating:WHAT`` (atomic, nothing
dropped), then converted from there batch by batch, each batch in one
transaction that also removes it from the copy; the copy is deleted once empty.
An interrupted migration is finished by running the command again. Queue
entries that cannot be converted are dead-lettered with the reason and the raw
entry; the dupefilter's fingerprints are kept, and ``NAME:fingerprinter`` makes
every node use scrapy-redis's fingerprint for this crawl from then on, so a URL
the old crawl saw is not crawled again.

Pickle is read by a loader that refuses every class but a few inert values
(``plainpickle.INERT_CLASSES``: dates and times, decimals, sets, ordered dicts, lxml's
strings): scrapy-redis's request dicts are plain data with those in their
``meta``, and anything else in them is refused, never run. A converted entry is
then read back as any queue entry is, with the same checks.

A FIFO or LIFO list is converted in the order scrapy-redis would have popped it,
so within a host and a priority the frontier hands the requests out in that
order (``SCHEDULER_QUEUE_CLASS`` says which of the two the list is).
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from scrapy.utils.request import RequestFingerprinter

from extensions import connection
from extensions.compat import PICKLE_PREFIX, SCRAPY_REDIS_FINGERPRINTS, ScrapyRedisFingerprinter
from extensions.exceptions import ConfigError, SerializationError
from extensions.frontier import values
from extensions.frontier.deadletter import DeadLetters
from extensions.frontier.frontier import Frontier
from extensions.frontier.groups import group_for
from extensions.frontier.results import Entry
from extensions.frontier.serializer import dumps_request, loads_request
from extensions.plainpickle import unpickle, url_of

if TYPE_CHECKING:
    import redis
    from scrapy import Spider

    from extensions.frontier.bloom import BloomParams
    from extensions.keys import SpiderKeys

logger = logging.getLogger(__name__)

BATCH = 500
NODE_ID = "migrate"  # who the dead-letter records name


@dataclass
class Report:
    """What a migration found and did."""

    requests: int = 0
    dead_lettered: int = 0
    fingerprints: int = 0
    notes: list[str] = field(default_factory=list)


def lifo_queue_class(queue_class: Any) -> bool:
    """Whether scrapy-redis's SCHEDULER_QUEUE_CLASS names its LIFO queue."""
    path = queue_class if isinstance(queue_class, str) else getattr(queue_class, "__name__", "")
    return str(path).rpartition(".")[2] in ("LifoQueue", "SpiderStack")


def spider_stub(spidercls: type[Spider]) -> Spider:
    """An instance to resolve callbacks by name on, without running the
    spider's constructor (which may connect to services)."""
    return spidercls.__new__(spidercls)


class Migration:
    def __init__(
        self,
        server: redis.Redis,
        keys: SpiderKeys,
        spider: Spider,
        bloom: BloomParams | None = None,
        batch: int = BATCH,
        queue_by: str = "host",
        lifo: bool = False,
    ):
        self.server = server
        self.lifo = lifo
        self.queue_by = queue_by
        self.keys = keys
        self.spider = spider
        self.batch = batch
        self.frontier = Frontier(server, keys, NODE_ID, bloom)
        self.dead_letters = DeadLetters(server, keys.dlq, NODE_ID)

    # --- what is there ------------------------------------------------------------

    def _type(self, key: str) -> str:
        return connection.text(self.server.type(key))

    def foreign_queue(self) -> bool:
        kind = self._type(self.keys.requests)
        if kind != "zset":
            return kind == "list"  # scrapy-redis's FIFO / LIFO queue
        first: Any = self.server.zrange(self.keys.requests, 0, 0)
        return bool(first) and first[0].startswith(PICKLE_PREFIX)

    def foreign_dupefilter(self) -> bool:
        return self._type(self.keys.dupefilter) == "set"

    def plan(self) -> list[str]:
        """What would be converted, one line each (nothing is changed)."""
        lines = []
        for key in (self.keys.migrating("requests"), self.keys.migrating("dupefilter")):
            if self.server.exists(key):
                lines.append(f"finish the interrupted conversion of {key}")
        if self.foreign_queue():
            size = self._size(self.keys.requests)
            lines.append(
                f"convert {size} pickled requests in {self.keys.requests} to JSON"
                + self._order_note(self._type(self.keys.requests))
            )
        if self.foreign_dupefilter():
            size = self.server.scard(self.keys.dupefilter)
            lines.append(f"keep the {size} scrapy-redis fingerprints of {self.keys.dupefilter}")
        return lines

    def _order_note(self, kind: str) -> str:
        if kind != "list":
            return " (a priority queue: highest priority first)"
        if self.lifo:
            return " (a LIFO list, as SCHEDULER_QUEUE_CLASS says: newest first)"
        return (
            " (a FIFO list: oldest first; if it was a LifoQueue, set SCHEDULER_QUEUE_CLASS "
            "to scrapy_redis.queue.LifoQueue)"
        )

    def _size(self, key: str) -> int:
        kind = self._type(key)
        size: Any = {"zset": self.server.zcard, "list": self.server.llen, "set": self.server.scard}
        return int(size[kind](key)) if kind in size else 0

    # --- doing it -------------------------------------------------------------------

    def run(self, progress: Callable[[str], None] = logger.info) -> Report:
        if self.keys.shards > 1:
            # scrapy-redis's fingerprints do not say their host, so not their shard
            raise ConfigError(
                "scrapy migrate carries a crawl over into one frontier shard: run it, and "
                "the crawl, with FRONTIER_SHARDS=1"
            )
        report = Report()
        legacy_fingerprints = (
            self.foreign_dupefilter()
            or self.server.exists(self.keys.migrating("dupefilter"))
            or self.server.get(self.keys.fingerprinter) is not None
        )
        ours = self._type(self.keys.dupefilter) == "hash"
        if legacy_fingerprints and ours and self.server.get(self.keys.fingerprinter) is None:
            raise SerializationError(
                f"{self.keys.dupefilter} already holds this crawler's fingerprints of "
                "Scrapy's kind; scrapy-redis's cannot join them (clear one of the two)"
            )
        if self.foreign_dupefilter():
            self._move(self.keys.dupefilter, "dupefilter")
        if self.foreign_queue():
            self._move(self.keys.requests, "requests")
        if legacy_fingerprints:
            # Set first: whatever a node writes from now on must match what is kept.
            self.server.set(self.keys.fingerprinter, SCRAPY_REDIS_FINGERPRINTS)
            fingerprinter: Any = ScrapyRedisFingerprinter()
        else:
            fingerprinter = RequestFingerprinter()
        report.fingerprints = self._convert_dupefilter(progress)
        self._convert_queue(fingerprinter, report, progress)
        return report

    def _move(self, key: str, what: str) -> None:
        target = self.keys.migrating(what)
        if not self.server.renamenx(key, target):
            raise ConfigError(
                f"{target} exists already (an interrupted migration) while {key} holds "
                "scrapy-redis state too; finish or delete one of them first"
            )

    def _convert_dupefilter(self, progress: Callable[[str], None]) -> int:
        source = self.keys.migrating("dupefilter")
        converted = 0
        while True:
            members: Any = self.server.srandmember(source, self.batch)
            if not members:
                break
            entries: list[Entry] = []
            for member in members:
                # anything that is not a fingerprint of scrapy-redis's has nothing to keep
                with contextlib.suppress(ValueError):
                    entries.append((bytes.fromhex(connection.text(member)), "", 0, b""))
            pipe = self.server.pipeline(transaction=True)
            self.frontier.enqueue_on(pipe, entries)  # an empty request only records it
            pipe.srem(source, *members)
            pipe.execute()
            converted += len(entries)
            if converted % (self.batch * 100) < self.batch:
                progress(f"{converted} fingerprints kept")
        return converted

    def _convert_queue(
        self, fingerprinter: Any, report: Report, progress: Callable[[str], None]
    ) -> None:
        source = self.keys.migrating("requests")
        kind = self._type(source)
        while kind in ("zset", "list"):
            raws: Any
            # each batch in the order scrapy-redis pops: FifoQueue from the right
            # end, LifoQueue from the left (both push on the left)
            if kind == "zset":
                raws = self.server.zrange(source, 0, self.batch - 1)
            elif self.lifo:
                raws = self.server.lrange(source, 0, self.batch - 1)
            else:
                raws = self.server.lrange(source, -self.batch, -1)[::-1]
            if not raws:
                break
            entries: list[Entry] = []
            pipe = self.server.pipeline(transaction=True)
            for raw in raws:
                try:
                    data, request = self._convert(raw)
                except SerializationError as exc:
                    self._dead_letter(raw, str(exc), pipe)
                    report.dead_lettered += 1
                    continue
                # queued as it is (it was pending), its fingerprint recorded as seen
                group = group_for(request.url, request.meta.get("download_slot"), self.queue_by)
                entries.append(("", group, request.priority, data))
                entries.append((fingerprinter.fingerprint(request), "", 0, b""))
                report.requests += 1
            self.frontier.enqueue_on(pipe, entries)
            if kind == "zset":
                pipe.zrem(source, *raws)
            elif self.lifo:
                pipe.ltrim(source, len(raws), -1)
            else:
                pipe.ltrim(source, 0, -len(raws) - 1)
            pipe.execute()
            progress(f"{report.requests} requests converted")
            kind = self._type(source)

    def _convert(self, raw: bytes) -> tuple[bytes, Any]:
        if raw.startswith(b"{"):  # this crawler's own JSON, queued after a partial switch
            return raw, loads_request(raw, self.spider)
        try:
            obj = unpickle(raw)
        except Exception as exc:  # any garbage: the entry's fault
            raise SerializationError(f"not a pickled request: {exc}") from None
        # Read back as any queue entry is: the same checks of every field, callback and class.
        request = loads_request(_stored_form(obj), self.spider)
        return dumps_request(request, self.spider), request

    def _dead_letter(self, raw: bytes, error: str, pipe: Any) -> None:
        self.dead_letters.add(
            kind="unreadable",
            url=url_of(raw),
            error=f"scrapy-redis queue entry: {error}",
            raw64=base64.b64encode(raw).decode("ascii"),
            pipe=pipe,
        )


def _stored_form(obj: Any) -> bytes:
    """A scrapy-redis request dict as this crawler's JSON queue entry."""
    if not isinstance(obj, dict):
        raise SerializationError(f"not a request dict but a {type(obj).__name__}")
    out = {k: v for k, v in obj.items() if v is not None or k not in ("callback", "errback")}
    body = out.get("body")
    if isinstance(body, bytes):
        try:
            out["body"] = body.decode("utf-8")
        except UnicodeDecodeError:
            del out["body"]
            out["body64"] = base64.b64encode(body).decode("ascii")
    headers = out.get("headers")
    if isinstance(headers, dict):
        out["headers"] = {
            _latin(k): [_latin(v) for v in (vs if isinstance(vs, list) else [vs])]
            for k, vs in headers.items()
        }
    values.encode_fields(out, "")
    try:
        return json.dumps(out, separators=(",", ":")).encode()
    except (TypeError, ValueError) as exc:  # bytes or a set where text belongs
        raise SerializationError(f"not a request of plain fields: {exc}") from None


def _latin(value: Any) -> Any:
    return value.decode("latin-1") if isinstance(value, bytes) else value
