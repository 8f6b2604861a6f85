"""``crawl.pages`` events (``WEBHOOK_PAGE_EVENTS``): the pages the crawl has
fetched, in batches.

Each node pushes a page to ``NAME:webhooks:pages`` with the flush that releases
its lease (``PagesPart``, a write section of the frontier): a node killed
before that flush pushes nothing, and the page, fetched again, is pushed by
the node that fetches it. Any node bundles what is there into events, an
event per crawl id, in one script that takes the pages and fills the outbox
(``webhook_pages.lua``), so each page is told once. A page whose lease a part
keeps past its fetch (the Parquet store's, until its file is committed) is
pushed with its fetch: a node killed in between has it told twice.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import NotConfigured

from extensions import clock
from extensions.frontier.context import WriteSection
from extensions.frontier.part import FrontierPart
from extensions.frontier.redisops import fields, load_script, run_named
from extensions.meta import CRAWL_ID, DEAD_LETTERED

if TYPE_CHECKING:
    import redis
    from redis.client import Pipeline
    from scrapy import Request
    from scrapy.settings import BaseSettings

    from extensions.frontier.context import PartContext
    from extensions.frontier.frontier import Frontier
    from extensions.keys import SpiderKeys

logger = logging.getLogger(__name__)

#: seconds the oldest page waits for its batch to fill
WAIT = 5.0


def page_events_on(settings: BaseSettings) -> bool:
    return bool(settings.getlist("WEBHOOK_URLS")) and settings.getbool("WEBHOOK_PAGE_EVENTS")


class PagesSection(WriteSection):
    name = "webhook_pages"
    phase = "after"

    def __init__(self, key: str):
        self.key = key
        self.owed: list[str] = []

    def take(self, parked_groups: list[str]) -> list[str]:
        taken, self.owed = self.owed, []
        return taken

    def queue(self, payload: list[str], frontier: Frontier, pipe: Pipeline) -> None:
        pipe.rpush(self.key, *payload)

    def kept(self, payload: list[str]) -> None:
        self.owed = payload + self.owed


class PagesPart(FrontierPart):
    def __init__(self, context: PartContext):
        self.section = PagesSection(context.keys.named("webhooks_pages"))
        context.write_with_flush(self.section)

    @classmethod
    def from_context(cls, context: PartContext) -> PagesPart:
        if not page_events_on(context.settings):
            raise NotConfigured  # off, silently
        return cls(context)

    def finished(self, request: Request) -> None:
        page = {"url": request.url, "crawl": request.meta.get(CRAWL_ID) or "",
                "dead_lettered": bool(request.meta.get(DEAD_LETTERED)),
                "at": int(clock.now() * 1000)}  # fmt: skip
        self.section.owed.append(json.dumps(page, separators=(",", ":")))


class PageBundles:
    """Bundles the pages pushed into events (any node, each page once)."""

    def __init__(self, server: redis.Redis, keys: SpiderKeys, urls: list[str], batch: int):
        self.keys = keys
        self.urls = urls
        self.batch = batch
        self._script = server.register_script(load_script("extensions.webhooks:webhook_pages"))

    def bundle(self, force: bool = False) -> int:
        """Events told now (a batch at most; ``force``: whatever is there)."""
        keys = {
            "pages": self.keys.named("webhooks_pages"),
            "outbox": self.keys.named("webhooks"),
            "dead": self.keys.named("webhooks_dead"),
        }
        moment = clock.now()
        args: dict[str, Any] = {
            "batch": self.batch, "now": int(moment * 1000), "wait": int(WAIT * 1000),
            "force": "1" if force else "0", "spider": self.keys.name,
            "timestamp": dt.datetime.fromtimestamp(moment, dt.UTC).isoformat(),
        }  # fmt: skip
        result = fields(run_named(self._script, keys, args, items=self.urls))
        if int(result["refused"]):
            logger.warning("%s held %s entries that are no page: kept in %s",
                           keys["pages"], result["refused"], keys["dead"])  # fmt: skip
        return int(result["told"])
