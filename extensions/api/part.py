"""Writes the API crawls' pages (``capture.py``) into their results lists with
the flush that releases them: a page whose node died before its release is
fetched and kept again by another node, and kept once."""

from __future__ import annotations

from typing import TYPE_CHECKING

from extensions.api.capture import Captured, captured
from extensions.frontier.context import WriteSection
from extensions.frontier.part import FrontierPart

if TYPE_CHECKING:
    from redis.client import Pipeline
    from scrapy import Request

    from extensions.frontier.context import PartContext
    from extensions.frontier.frontier import Frontier


class ApiResults(WriteSection):
    name = "api_results"
    phase = "after"

    def __init__(self, pending: Captured, ttl: int):
        self.pending = pending
        self.ttl = ttl

    def take(self, parked_groups: list[str]) -> list[tuple[str, str]] | None:
        if not self.pending.ready:
            return None
        taken = list(self.pending.ready)
        self.pending.ready.clear()
        return taken

    def queue(self, payload: list[tuple[str, str]], frontier: Frontier, pipe: Pipeline) -> None:
        by_crawl: dict[str, list[str]] = {}
        for crawl, document in payload:
            by_crawl.setdefault(crawl, []).append(document)
        for crawl, documents in by_crawl.items():
            key = frontier.keys.named("api_results", crawl=crawl)
            pipe.rpush(key, *documents)
            pipe.expire(key, self.ttl)

    def kept(self, payload: list[tuple[str, str]]) -> None:
        self.pending.ready[:0] = payload


class ApiResultsPart(FrontierPart):
    def __init__(self, pending: Captured):
        self.pending = pending

    @classmethod
    def from_context(cls, context: PartContext) -> ApiResultsPart:
        pending = captured(context.crawler)
        context.write_with_flush(ApiResults(pending, context.settings.getint("API_RESULTS_TTL")))
        return cls(pending)

    def finished(self, request: Request) -> None:
        self.pending.finished(request)
