"""What a node's crawls under an id did since its last flush: requests done
(counted as the engine finishes them) and items (the runtime's, counted by
spidermiddlewares/crawlid.py), written with the flush that releases them, into
each crawl's ``NAME:crawl:ID``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from extensions.cluster.checkpoint import now_ms
from extensions.crawlid import crawls_of
from extensions.frontier.context import WriteSection

if TYPE_CHECKING:
    from redis.client import Pipeline

    from extensions.frontier.frontier import Frontier


@dataclass
class Tallied:
    """One flush's counts: done and items as taken, and the copies it parks."""

    done: dict[str, int]
    items: dict[str, int]
    parked: dict[str, int]

    def __bool__(self) -> bool:
        return bool(self.done or self.items or self.parked)

    def counts(self) -> dict[str, dict[str, int]]:
        """Per crawl: done, less the copies parked now (a retry is still to be
        done, as for the spider's count), and the items."""
        counts: dict[str, dict[str, int]] = {c: {"done": n} for c, n in self.done.items()}
        for crawl, parked in self.parked.items():
            entry = counts.setdefault(crawl, {})
            entry["done"] = entry.get("done", 0) - parked
        for crawl, count in self.items.items():
            counts.setdefault(crawl, {})["items"] = count
        return counts


class CrawlTally(WriteSection):
    name = "crawl_counts"
    phase = "after"

    def __init__(self, items: dict[str, int]):
        self.done: dict[str, int] = {}
        #: shared with the spider middleware that counts them
        self.items = items

    def finished(self, crawl: str | None) -> None:
        if crawl:
            self.done[crawl] = self.done.get(crawl, 0) + 1

    def take(self, parked_groups: list[str]) -> Tallied:
        taken = Tallied(self.done, dict(self.items), crawls_of(parked_groups))
        self.done = {}
        self.items.clear()
        return taken

    def queue(self, payload: Tallied, frontier: Frontier, pipe: Pipeline) -> None:
        now = now_ms()
        for crawl, counts in payload.counts().items():
            key = frontier.keys.crawl(crawl)
            for name, value in counts.items():
                if value:
                    pipe.hincrby(key, name, value)
            pipe.hset(key, "updated", now)

    def kept(self, payload: Tallied) -> None:
        for owed, taken in ((self.done, payload.done), (self.items, payload.items)):
            for crawl, count in taken.items():
                owed[crawl] = owed.get(crawl, 0) + count
