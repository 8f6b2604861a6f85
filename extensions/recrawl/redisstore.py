"""The Redis side of recrawls, for the frontier: pages kept for a recrawl
(``NAME:revisit``, ``NAME:due``), fed into the queue when due, moved by a
sitemap's ``<lastmod>`` or by hand (``scrapy recrawl``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from extensions.cluster.checkpoint import now_ms
from extensions.frontier.redisops import execute, run_named
from extensions.recrawl.records import RecrawlSchedule, revisit_page, revisit_state

if TYPE_CHECKING:
    from redis.client import Pipeline

    from extensions.frontier.frontier import Frontier
    from extensions.keys import SpiderKeys

HOUR_MS = 3_600_000
# its scripts, in this package (they push: they carry the crawl's pieces)
FEED, REQUEUE = f"{__package__}:recrawl_feed", f"{__package__}:recrawl_requeue"


def _left(limit: int | None, done: int) -> int | None:
    return None if limit is None else max(limit - done, 0)


class RecrawlStore:
    """The pages a crawl keeps for a recrawl, in its frontier's shards."""

    def __init__(self, frontier: Frontier):
        self.frontier = frontier
        self.server = frontier.server
        self.shards = frontier.shards

    def revisit(
        self, entries: list[tuple[str, str, float, bytes]], pipe: Pipeline | None = None
    ) -> None:
        """Schedule pages to be fetched again: (request fingerprint in hex, group,
        due time in seconds since epoch, the request's JSON) entries."""
        for shard, part in self.frontier.by_shard(entries, lambda entry: entry[1]).items():
            keys = self.shards[shard]
            target = pipe or self.server
            target.hset(
                keys.named("revisit"),
                mapping={fp: group.encode() + b"\n" + data for fp, group, _, data in part},
            )
            target.zadd(keys.named("due"), {fp: int(due * 1000) for fp, _, due, _ in part})

    def feed_due(self, limit: int, in_turn: bool = True) -> int:
        """Queue up to ``limit`` pages per shard whose recrawl is due, in a
        heartbeat's turn of shards (or in every shard); returns how many were queued."""
        now = now_ms()
        results = self.frontier.in_scopes(
            self.frontier.manifest.script(FEED),
            lambda keys: (
                {
                    "due": keys.named("due"),
                    "revisit": keys.named("revisit"),
                    "ready": keys.ready,
                    "waiting": keys.waiting,
                    "frontier": keys.frontier,
                },
                {
                    "now": now,
                    "limit": limit,
                    "queue_prefix": keys.queue(""),
                    "data_prefix": keys.data(""),
                },
            ),
            "feed" if in_turn else None,
        )
        return sum(int(queued) for _, queued in results)

    def requeue(self, entries: list[tuple[str, str, bytes]]) -> int:
        """Queue (fingerprint in hex, group, request JSON) pages a status store
        outside Redis found due, each marked in NAME:revisit; a page marked
        already is queued or in flight, and is not queued again. Returns how
        many were queued."""
        queued = 0
        for shard, part in self.frontier.by_shard(entries, lambda entry: entry[1]).items():
            keys = self.shards[shard]
            items: list[Any] = []
            for fingerprint, group, data in part:
                items.extend((fingerprint, group, data))
            script_keys = {"revisit": keys.named("revisit"), "ready": keys.ready,
                           "waiting": keys.waiting, "frontier": keys.frontier}  # fmt: skip
            args = {"queue_prefix": keys.queue(""), "data_prefix": keys.data("")}
            queued += int(
                run_named(self.frontier.manifest.script(REQUEUE), script_keys, args, items=items)
            )
        return queued

    def unmark(self, entries: list[tuple[str, str]], pipe: Pipeline | None = None) -> None:
        """Forget the queued marks of (fingerprint in hex, group) pages whose new
        status is in the store outside Redis."""
        for shard, part in self.frontier.by_shard(entries, lambda entry: entry[1]).items():
            (pipe or self.server).hdel(self.shards[shard].named("revisit"), *(fp for fp, _ in part))

    def recrawl_schedule(self, hours: int = 24) -> RecrawlSchedule:
        """The pages kept for a recrawl, how many are due now, and how many fall
        due in each of the next ``hours`` hours."""
        now = now_ms()
        pipe = self.server.pipeline(transaction=False)
        for keys in self.shards:
            pipe.hlen(keys.named("revisit"))
            pipe.zcount(keys.named("due"), "-inf", now)
            for hour in range(hours):
                start, end = now + hour * HOUR_MS, now + (hour + 1) * HOUR_MS
                pipe.zcount(keys.named("due"), f"({start}", end)
        counts = [int(n) for n in execute(pipe)]
        stride = hours + 2
        shards = [counts[i : i + stride] for i in range(0, len(counts), stride)]
        return RecrawlSchedule(
            pages=sum(shard[0] for shard in shards),
            due=sum(shard[1] for shard in shards),
            due_by_hour=[sum(shard[2 + hour] for shard in shards) for hour in range(hours)],
        )

    def recrawl_now(
        self, wanted: Callable[[str, float | None], bool], limit: int | None = None
    ) -> tuple[int, int]:
        """Make the recorded pages ``wanted(url, last fetch time)`` accepts due
        now, at most ``limit`` of them: (pages made due, unreadable records).
        Reads every record (HSCAN): a by-hand operation, not a node's.

        A page already queued or in flight is left alone (ZADD XX); one due
        earlier keeps its date (LT): so none is queued twice."""
        now = now_ms()
        chosen = unreadable = 0
        for keys in self.shards:
            batch: list[bytes] = []
            for fingerprint, record in self.server.hscan_iter(keys.named("revisit"), count=1000):
                page = revisit_page(record)
                if page is None:
                    unreadable += 1
                elif wanted(*page):
                    batch.append(fingerprint)
                    if len(batch) >= 1000:
                        chosen += self._due_now(keys, batch, now, _left(limit, chosen))
                        batch = []
                        if _left(limit, chosen) == 0:
                            break
            chosen += self._due_now(keys, batch, now, _left(limit, chosen))
            if _left(limit, chosen) == 0:
                break
        return chosen, unreadable

    def lastmod(self, entries: list[tuple[str, str, float]]) -> tuple[int, int]:
        """What a sitemap's ``<lastmod>`` says of pages kept for a recrawl:
        (request fingerprint in hex, group, lastmod in seconds since epoch)
        entries. A page changed since its last fetch is made due now; one that
        did not has its recrawl put off by its interval from now. Only pages
        waiting for their date are moved (ZADD XX), so none is queued twice.
        Returns (made due, put off)."""
        now = now_ms()
        sooner = later = 0
        for shard, part in self.frontier.by_shard(entries, lambda entry: entry[1]).items():
            keys = self.shards[shard]
            records: list[Any] = self.server.hmget(keys.named("revisit"), [fp for fp, _, _ in part])
            due_now: dict[str, int] = {}
            put_off: dict[str, int] = {}
            for (fp, _, modified), record in zip(part, records, strict=True):
                page = revisit_state(record) if record else None
                _, fetched_at, interval = page or ("", None, None)
                if fetched_at is None:
                    continue  # never fetched: the dupefilter decides, as for any link
                if modified > fetched_at:
                    due_now[fp] = now
                elif interval:
                    put_off[fp] = now + int(interval * 1000)
            pipe = self.server.pipeline(transaction=False)
            if due_now:
                pipe.zadd(keys.named("due"), due_now, xx=True, lt=True, ch=True)
            if put_off:
                pipe.zadd(keys.named("due"), put_off, xx=True, gt=True, ch=True)
            results = iter(execute(pipe))
            sooner += int(next(results)) if due_now else 0
            later += int(next(results)) if put_off else 0
        return sooner, later

    def _due_now(
        self, keys: SpiderKeys, fingerprints: list[bytes], now: int, limit: int | None
    ) -> int:
        if not fingerprints or limit == 0:
            return 0
        # only pages waiting for their date (XX): the others are queued or in flight
        pipe = self.server.pipeline(transaction=False)
        for fingerprint in fingerprints:
            pipe.zscore(keys.named("due"), fingerprint)
        scores = execute(pipe)
        waiting = [fp for fp, s in zip(fingerprints, scores, strict=True) if s is not None][:limit]
        if waiting:
            self.server.zadd(keys.named("due"), dict.fromkeys(waiting, now), xx=True, lt=True)
        return len(waiting)
