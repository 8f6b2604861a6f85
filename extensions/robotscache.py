"""robots.txt once for the cluster (``ROBOTSTXT_SHARED``, on by default).

Without it every node fetches every host's robots.txt itself: three nodes
starting on forty names of one server send it 120 requests in the first
seconds, outside every limit. Here the first node that needs a host's robots.txt
claims it in Redis (``NAME:robots:NETLOC``) and fetches it; the others wait for
its answer, then parse the same body. The body is kept for
``ROBOTSTXT_CACHE_TTL`` seconds (RFC 9309: a cached robots.txt should not be
used longer than 24 hours). A robots.txt that could not be had (5xx, 429, no
connection) is not kept: the claim is let go, and the next node that needs it
asks again after its wait. A record anyone else wrote that is not one is
ignored, counted, and replaced.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import redis

from extensions.runtime import state_of

if TYPE_CHECKING:
    from extensions.keys import SpiderKeys
    from extensions.usage import RobotsUsage

logger = logging.getLogger(__name__)

#: a record: this mark, then the body as fetched (bounded)
BODY_MARK = b"R"
PENDING = b"P"
#: RFC 9309: a crawler must parse at least 500 KiB; what follows is not kept
MAX_BODY = 500 * 1024
POLL = 0.25  # seconds between looks while another node fetches it
CLAIM_MAX = 30.0


class SharedRobots:
    def __init__(self, server: redis.Redis, keys: SpiderKeys, stats: Any, settings: Any):
        self.server = server
        self.keys = keys
        self.stats = stats
        self.ttl = settings.getint("ROBOTSTXT_CACHE_TTL")
        # a claim outlives its fetch (DOWNLOAD_TIMEOUT), or its node if it dies, by
        # CLAIM_MAX at most: a slower fetch may be made twice, no host waits long
        self.claim_seconds = min(settings.getfloat("DOWNLOAD_TIMEOUT"), CLAIM_MAX) + 5

    async def body_or_claim(self, netloc: str) -> bytes | None:
        """The cluster's robots.txt body for ``netloc``, waiting while another node
        fetches it; None: this node is to fetch it (it holds the claim, or Redis
        cannot say)."""
        key = self.keys.robots(netloc)
        deadline = time.monotonic() + self.claim_seconds
        try:
            for _ in range(int(self.claim_seconds / POLL) + 10):
                raw: Any = self.server.get(key)
                if raw is None:
                    claim_ms = int(self.claim_seconds * 1000)
                    if self.server.set(key, PENDING, nx=True, px=claim_ms):
                        return None
                elif raw.startswith(BODY_MARK) and len(raw) <= MAX_BODY + 1:
                    self.stats.inc_value("robotstxt/shared")
                    return bytes(raw[1:])
                elif raw != PENDING:
                    self.stats.inc_value("robotstxt/bad_records")
                    self.server.delete(key)
                elif time.monotonic() > deadline:
                    break
                else:
                    await _sleep(POLL)
        except redis.RedisError as exc:
            logger.debug("robots.txt of %s: the cluster's copy unreadable (%s)", netloc, exc)
        return None  # fetched here (a claim that outlived its fetch, Redis away)

    def keep(self, netloc: str, body: bytes) -> None:
        """The robots.txt fetched here, for every node."""
        try:
            self.server.set(self.keys.robots(netloc), BODY_MARK + body[:MAX_BODY], ex=self.ttl)
        except redis.RedisError as exc:
            logger.debug("robots.txt of %s kept on this node alone (%s)", netloc, exc)

    def let_go(self, netloc: str) -> None:
        """Not had: the next node that needs it asks again."""
        try:
            key = self.keys.robots(netloc)
            if self.server.get(key) == PENDING:
                self.server.delete(key)
        except redis.RedisError:
            pass  # the claim expires by itself


async def _sleep(seconds: float) -> None:
    from scrapy.utils.defer import maybe_deferred_to_future
    from twisted.internet import reactor
    from twisted.internet.task import deferLater

    await maybe_deferred_to_future(deferLater(reactor, seconds))


@dataclass
class RobotsState:
    """What a node's middlewares hand each other of hosts' robots.txt."""

    #: netloc -> the send slot of the page whose robots.txt is being fetched: the
    #: robots.txt goes at it, the page asks for a new one (robotstxt.py, pushback.py)
    slots: dict[str, Any] = field(default_factory=dict)
    #: groups whose robots.txt asked for a Crawl-delay, fetched here or read from the
    #: cluster: their requests leased before Redis knew it ask for a send slot
    #: (sendslots.py, robotstxt.py)
    crawl_delayed: OrderedDict[str, None] = field(default_factory=OrderedDict)
    #: netloc -> the usage preferences its robots.txt states (usage.py), fetched here
    #: or read from the cluster, for its items (robotstxt.py, spidermiddlewares/usage.py)
    usage: OrderedDict[str, RobotsUsage] = field(default_factory=OrderedDict)


def robots_state(crawler: Any) -> RobotsState:
    return state_of(crawler, RobotsState, RobotsState)
