"""A crawl's events, seen once for the cluster: every node reads the crawls'
states now and then (those ``scrapy crawls`` shows), and the first to see one
change records it and puts its event in the outbox in one script
(``webhook_event.lua``); the others find the state moved on and tell nothing.

What is told: a crawl seen ``running`` or ``paused`` first, or running again
after it finished or stopped: ``crawl.started``; ``running`` to ``paused``:
``crawl.paused``, and back: ``crawl.resumed``; to ``finished`` (nothing left,
something done): ``crawl.completed``; to ``stopped`` (``scrapy stop``) or
``expired`` (past its expiry): ``crawl.failed``, with the reason. A crawl a node
first sees already over is recorded, not told. Beside crawls under an id, the
spider's crawl without one is not told (its figures are what theirs leave).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
from typing import TYPE_CHECKING, Any

from extensions import clock, connection
from extensions.frontier.crawls.state import Crawls
from extensions.frontier.frontier import Frontier
from extensions.frontier.redisops import fields, load_script, run_named
from extensions.observability.status import all_figures

if TYPE_CHECKING:
    import redis

    from extensions.frontier.crawls.state import CrawlFigures
    from extensions.keys import SpiderKeys

logger = logging.getLogger(__name__)

LIVE = ("running", "paused")
OVER = ("finished", "stopped", "expired")
REASONS = {"stopped": "stopped (scrapy stop)", "expired": "its expiry passed"}


def event_type(before: str, after: str) -> str:
    """The event a crawl's state change is ("" for none)."""
    if before == after:
        return ""
    if after in LIVE and before in ("", *OVER):
        return "crawl.started"
    if (before, after) == ("running", "paused"):
        return "crawl.paused"
    if (before, after) == ("paused", "running"):
        return "crawl.resumed"
    if before in LIVE and after == "finished":
        return "crawl.completed"
    if before in LIVE and after in ("stopped", "expired"):
        return "crawl.failed"
    return ""


def state_of(figures: CrawlFigures) -> str:
    """The crawl's state as told: "finished" once nothing is left and something
    was done, paused or not (a finished crawl paused has not started again)."""
    if figures.state in LIVE and not figures.pending and (figures.done or figures.dlq):
        return "finished"
    return figures.state


def body(kind: str, event_id: str, spider: str, figures: CrawlFigures, before: str) -> str:
    data: dict[str, Any] = {
        "id": event_id,
        "spider": spider,
        "crawl": figures.crawl or None,
        "previous": before or None,
        "figures": figures.as_dict(),
    }
    if kind == "crawl.failed":
        data["reason"] = REASONS.get(figures.state, figures.state)
    moment = dt.datetime.fromtimestamp(clock.now(), dt.UTC).isoformat()
    return json.dumps({"type": kind, "timestamp": moment, "data": data}, separators=(",", ":"))


class CrawlEvents:
    def __init__(self, server: redis.Redis, keys: SpiderKeys, urls: list[str]):
        self.server = server
        self.keys = keys
        self.urls = urls
        self.crawls = Crawls(server, keys)
        self.states_key = keys.named("webhooks_states")
        self.outbox = keys.named("webhooks")
        self._script = server.register_script(load_script("extensions.webhooks:webhook_event"))

    def look(self) -> list[str]:
        """Tell what changed since the crawls' states were last recorded; the
        events this node told."""
        held = {
            connection.text(crawl): connection.text(value)
            for crawl, value in self.server.hgetall(self.states_key).items()
        }
        told = []
        # start URLs not read yet: no crawl is over, whatever its queues say
        unread = Frontier(self.server, self.keys, node_id="").sizes().start_urls
        crawls = all_figures(self.crawls)
        named = any(figures.crawl for figures in crawls)
        for figures in crawls:
            if named and not figures.crawl:
                # beside crawls under an id, the spider's own is what their counts do
                # not cover, which moves with the moment each is read: not told
                continue
            recorded = held.get(figures.crawl, "")
            before, _, count = recorded.partition(" ")
            if not count.isdigit() or len(count) > 12:
                # another writer's value: the crawl is told afresh from what it is now
                before, count = "", "0"
            after = state_of(figures)
            if after == before or (after == "finished" and unread):
                continue
            kind = event_type(before, after)
            events = int(count) + (1 if kind else 0)
            seed = f"{self.keys.name}\0{figures.crawl}\0{events}".encode()
            event_id = "evt_" + hashlib.sha1(seed).hexdigest()[:24]
            text = body(kind, event_id, self.keys.name, figures, before) if kind else ""
            items = [part for url in self.urls for part in (url, text)] if kind else []
            result = fields(run_named(
                self._script, {"states": self.states_key, "outbox": self.outbox},
                {"crawl": figures.crawl, "expected": recorded, "state": f"{after} {events}",
                 "id": event_id, "type": kind},
                items=items,
            ))  # fmt: skip
            if kind and int(result["told"]):
                logger.info("%s (crawl %r): told to %d URLs", kind, figures.crawl, len(self.urls))
                told.append(kind)
        return told
