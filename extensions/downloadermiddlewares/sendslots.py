"""A paced request goes at its send slot, never closer to the one before.

A lease hands each request of a paced host (a rate, a Crawl-delay, an adaptive
rate) a send slot (``extensions/frontier/hosts/state.py``). At send time the request
waits for it; one that comes too late for it (a busy node) asks Redis for
another, so none goes closer to the one before than the host's interval
allows, from all nodes together. A request leased before its host's robots.txt
asked for a Crawl-delay has no slot: it asks Redis for one too.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import redis
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.task import deferLater

from extensions import clock
from extensions.bans import SCANNED
from extensions.meta import SEND_SLOT

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy import Request
    from scrapy.http import Response

    from extensions.frontier.hosts.state import HostStates

CRAWL_DELAYED_REMEMBERED = 50_000  # hosts whose robots.txt asked for a Crawl-delay, at most
# seconds a late request may go on missing the slots it takes before it is
# handed back: a busy node's timers fire late for a while (a burst of pages to
# parse), and a count of misses would hand back the requests that met the burst
# first; one that misses for this long is on a node too busy for its host
MISSING_MAX = 10.0
# seconds a late or slotless request waits in the node for a slot near enough to
# take (its host's leases may take each first), well inside FRONTIER_LEASE_TIMEOUT
LATER_MAX = 60.0
ROBOTS_HOLD_MAX = 60.0  # seconds robots.txt waits for its host's hold at most


async def sleep(seconds: float) -> None:
    """Wait without blocking the reactor (whichever reactor runs)."""
    from twisted.internet import reactor

    await maybe_deferred_to_future(deferLater(reactor, seconds))


def remember_crawl_delay(crawl_delayed: OrderedDict[str, None], group: str, body: bytes) -> None:
    """A robots.txt ``body`` that asks for a Crawl-delay: ``group``'s requests
    leased before Redis knew of it ask Redis for a send slot."""
    if b"crawl-delay" in body[:SCANNED].lower():
        crawl_delayed[group] = None
        crawl_delayed.move_to_end(group)
        if len(crawl_delayed) > CRAWL_DELAYED_REMEMBERED:
            crawl_delayed.popitem(last=False)


class SendSlots:
    def __init__(
        self,
        hosts: HostStates,
        stats: Any,
        health: Any,
        crawl_delayed: OrderedDict[str, None] | None = None,
    ):
        self.hosts = hosts
        self.stats = stats
        self.health = health
        # groups whose robots.txt asked for a Crawl-delay: their unpaced requests
        # (leased before Redis knew of it) ask Redis for a slot
        self._crawl_delayed = OrderedDict() if crawl_delayed is None else crawl_delayed

    def paced(self, request: Request, group_of: Callable[[Request], str]) -> bool:
        """Whether ``request`` keeps a slot (the common case, an unpaced host, is not)."""
        if request.meta.get(SEND_SLOT):
            return True
        return bool(self._crawl_delayed) and group_of(request) in self._crawl_delayed

    async def wait(self, request: Request, group: str, held: dict[str, float]) -> float | None:
        """Wait for ``request``'s slot; None when it may go now, else the time it
        waits until in Redis (its host is held, or no slot came in time).
        ``held`` is the node's hold ends per group, updated here."""
        slot, window = request.meta.get(SEND_SLOT) or (0.0, 0.0)
        if slot > clock.now():
            await sleep(slot - clock.now())
            if held.get(group, 0) > clock.now():  # its host pushed back while it waited
                return held[group]
        if slot and clock.now() <= slot + window:
            return None  # on time for its slot: no round trip
        patient_until, missing_since = clock.now() + LATER_MAX, None
        while clock.now() < patient_until:
            # late (a busy node) or unpaced: Redis says whether it may still go, or when
            self.stats.inc_value("politeness/late")
            try:
                verdict, when, window = self.hosts.ask_to_send(group, slot, window)
            except redis.RedisError as exc:
                self.health.failed(exc)
                return clock.now() + 1
            if verdict == "send":
                return None
            if verdict == "hold":
                held[group] = when
                return when
            if verdict == "later":  # its free slot is further off: nothing taken yet
                self.stats.inc_value("politeness/later")
                await sleep(max(when - clock.now(), 0))
                continue
            slot = when  # a slot taken
            await sleep(max(slot - clock.now(), 0))
            if clock.now() <= slot + window:
                return None
            self.stats.inc_value("politeness/missed_slots")
            missing_since = missing_since or slot
            if clock.now() - missing_since > MISSING_MAX:
                break
        self.stats.inc_value("politeness/handed_back")
        return clock.now()

    async def robots_slot(self, request: Request, group: str, held: dict[str, float]) -> None:
        """Wait for a send slot for robots.txt, which no lease handed out; a held
        host's robots.txt waits for the hold (ROBOTS_HOLD_MAX at most)."""
        until = await self.wait(request, group, held)
        if until is not None:
            await sleep(min(max(until - clock.now(), 0), ROBOTS_HOLD_MAX))

    def answered(self, request: Request, response: Response, group: str) -> None:
        """What is leased before a host's Crawl-delay was known goes no faster than it."""
        if request.url.endswith("/robots.txt"):
            remember_crawl_delay(self._crawl_delayed, group, response.body)
