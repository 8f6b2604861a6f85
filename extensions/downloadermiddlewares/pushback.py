"""Hosts that push back slow the whole cluster down; bans never become data.

At send time, a request of a host this node knows is held waits in Redis with
its host, checked again as its download slot sends it (``extensions/downloader.py``);
a paced one waits for its send slot (``sendslots.py``).

At answer time:

* a status in ``HOST_BACKOFF_STATUSES`` (429, 503) is evidence
  (``extensions/frontier/hosts/state.py`` weighs it with the host's recent answers):
  a page refused on its own waits a backoff of its own, its ``Retry-After``
  holding the host while it runs; a host that refuses (a real share of its
  answers, or again at the pace it was slowed to) is held for every node, for
  its ``Retry-After`` (at most ``HOST_BACKOFF_MAX``) or a backoff, and its
  adaptive rate is cut. Either way the request waits in Redis without counting
  as a failure, up to ``HOST_BACKOFF_RETRY_TIMES`` waits, after which its answer
  goes to the retry middleware as any failure. Each node counts its answers
  of every host it fetches from (in memory, decayed); they go to Redis with
  its first refusal, and from then on once a second while the host is watched;
* a ban (``extensions/bans.py``) never reaches the callback: the host is held,
  the request is tried again later with a new identity (the proxy and user
  agent it was leased without are chosen afresh), and after ``BAN_RETRY_TIMES``
  it is dead-lettered as ``banned``. A ``BAN_HANDLER`` component (or a
  spider's ``handle_ban`` method) may first answer the challenge: the requests
  it returns are fetched at once. That lifts the ban, not its reason: the host
  is held and slowed all the same, and its pages come through after the hold;
* ``HOST_BACKOFF_ERRORS`` connection errors or timeouts in a row from one host
  (on one node) hold it too; the request itself is retried as any failure.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import redis
from scrapy import signals
from scrapy.exceptions import IgnoreRequest
from scrapy.utils.httpobj import urlparse_cached
from twisted.internet import task

from extensions import clock, connection
from extensions.bans import BanDetector
from extensions.cluster.checkpoint import node_id_for
from extensions.downloader import set_send_gate
from extensions.downloadermiddlewares.challenges import BAN_ANSWER, ChallengeAnswerer
from extensions.downloadermiddlewares.retry import backoff_delay, parse_retry_after
from extensions.downloadermiddlewares.sendslots import SendSlots
from extensions.exceptions import HostBanned
from extensions.frontier.deadletter import DeadLetters
from extensions.frontier.groups import group_for
from extensions.frontier.hosts.answers import REFUSED_URLS, AnswerLedger, RecentRefusals
from extensions.frontier.hosts.holds import HoldsHeard
from extensions.frontier.hosts.state import AGAIN, BAN, ERRORS, PUSH, Backoff, Event, HostStates
from extensions.frontier.leased import leased_for
from extensions.installed import require_addon
from extensions.keys import SpiderKeys
from extensions.meta import (
    BAN_RETRIES,
    FIRST_FAILURE,
    HOST_WAITS,
    HOST_WATCHED,
    SEND_SLOT,
)
from extensions.robotscache import robots_state
from extensions.wire.failures import tls_failure

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)

REPORT_INTERVAL = 1.0  # seconds between reports of good answers from watched hosts
# seconds between looks at the holds other nodes set: well inside the quarter
# second a request takes to be on the wire, for a few cheap XREADs a second
HOLDS_POLL = 0.1
# the download errors that say a host is overloaded or gone, not the request bad
HOST_ERRORS = (
    "TimeoutError",
    "TCPTimedOutError",
    "ConnectionRefusedError",
    "ConnectError",
    "ConnectionLost",
    "ResponseNeverReceived",
    "ConnectionDone",
)


class PushbackMiddleware:
    def __init__(
        self,
        crawler: Crawler,
        hosts: HostStates,
        dead_letters: DeadLetters,
        *,
        statuses: set[int],
        retry_times: int,
        error_run: int,
        ban_retry_times: int,
        retry_after_max: float,
        queue_by: str,
    ):
        self.crawler = crawler
        self.stats = crawler.stats
        self.hosts = hosts
        self.dead_letters = dead_letters
        self.statuses = statuses
        self.retry_times = retry_times
        self.error_run = error_run
        self.ban_retry_times = ban_retry_times
        self.retry_after_max = retry_after_max
        self.queue_by = queue_by
        self.bans: BanDetector | None = None  # built once the spider exists
        self.challenges: ChallengeAnswerer | None = None
        self.health = connection.health_for(crawler)
        self._held: dict[str, float] = {}  # group -> hold end this node knows of
        self._errors: dict[str, int] = {}  # group -> errors in a row here
        self.answers = AnswerLedger(hosts.backoff.window)
        robots = robots_state(crawler)
        self.slots = SendSlots(hosts, self.stats, self.health, robots.crawl_delayed)
        self.robots_slots = robots.slots
        self.as_leased = leased_for(crawler)
        self.refused_urls = RecentRefusals()
        self._loop: task.LoopingCall | None = None
        self._holds_loop: task.LoopingCall | None = None
        self.holds = HoldsHeard(hosts.server, hosts.keys)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> PushbackMiddleware:
        require_addon(crawler.settings, cls.__name__)
        s = crawler.settings
        assert crawler.spidercls is not None
        keys = SpiderKeys.for_crawler(crawler)
        server = connection.client_for(crawler)
        middleware = cls(
            crawler,
            HostStates(server, keys, Backoff.from_settings(s)),
            DeadLetters(server, keys.dlq, node_id_for(crawler)),
            statuses={int(x) for x in s.getlist("HOST_BACKOFF_STATUSES")},
            retry_times=s.getint("HOST_BACKOFF_RETRY_TIMES"),
            error_run=s.getint("HOST_BACKOFF_ERRORS"),
            ban_retry_times=s.getint("BAN_RETRY_TIMES"),
            retry_after_max=s.getfloat("HOST_BACKOFF_MAX"),
            queue_by=s.get("FRONTIER_QUEUE_BY"),
        )
        set_send_gate(crawler, middleware.held_at_send)
        crawler.signals.connect(middleware.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(middleware.spider_closed, signal=signals.spider_closed)
        return middleware

    def spider_opened(self, spider: Any) -> None:
        self.bans = BanDetector.from_settings(self.crawler.settings, spider)
        self.challenges = ChallengeAnswerer.for_spider(self.crawler, spider)
        self._loop = task.LoopingCall(self._report_good)
        self._loop.start(REPORT_INTERVAL, now=False)
        self._holds_loop = task.LoopingCall(self._hear_holds)
        self._holds_loop.start(HOLDS_POLL, now=False)

    def spider_closed(self, spider: Any) -> None:
        for loop in (self._loop, self._holds_loop):
            if loop is not None and loop.running:
                loop.stop()
        self._report_good()

    def group_of(self, request: Request) -> str:
        return group_for(request.url, request.meta.get("download_slot"), self.queue_by)

    async def process_request(self, request: Request, spider: Any = None) -> Request | None:
        if self._held:
            group = self.group_of(request)
            held = self._held.get(group)
            if held is not None:
                if held > clock.now():
                    return self._wait_for_hold(request, held)
                del self._held[group]
        if request.meta.get("dont_obey_robotstxt") and request.url.endswith("/robots.txt"):
            # robots.txt (once for the cluster) counts against its host's limits
            # (and its domain's and address's): it takes a send slot as a page does
            slot = self.robots_slots.pop(urlparse_cached(request).netloc, None)
            if slot:
                request.meta[SEND_SLOT] = slot  # the page's: it asks for a new one
            await self.slots.robots_slot(request, self.group_of(request), self._held)
            return None
        if not self.slots.paced(request, self.group_of):
            return None  # the common case: an unpaced host, sent at once
        until = await self.slots.wait(request, self.group_of(request), self._held)
        return None if until is None else self._wait_for_hold(request, until)

    def held_at_send(self, request: Request) -> Request | None:
        """``request``'s parked copy when its host was held while it waited in its
        download slot (it passed ``process_request`` before); None: it goes."""
        if not self._held or request not in self.as_leased:
            return None
        until = self._held.get(self.group_of(request), 0.0)
        if until <= clock.now():
            return None
        self.stats.inc_value("hosts/held_at_send")
        return self._wait_for_hold(request, until)

    def _wait_for_hold(self, request: Request, until: float) -> Request:
        """The request, back in Redis until its host's hold ends: with its host (at
        once when it missed its send slots for long, counted in ``sendslots``)."""
        if until > clock.now():
            self.stats.inc_value("hosts/held_requests")
        return self._park(request, until)

    def _park(self, request: Request, until: float) -> Request:
        return self.as_leased.parked(request, until)

    async def process_response(
        self, request: Request, response: Response, spider: Any = None
    ) -> Request | Response:
        group = self.group_of(request)
        self._errors.pop(group, None)
        assert self.bans is not None
        self.slots.answered(request, response, group)
        if request.meta.get(BAN_ANSWER):
            return response  # the answer to a challenge: the handler judges it
        if self.bans.is_ban(request, response):
            return await self._banned(request, response, group)
        if response.status in self.statuses:
            return self._refused(request, response, group)
        self.answers.answered(
            group,
            bool(request.meta.get(HOST_WATCHED)),
            float(request.meta.get("download_latency", 0.0)),
        )
        return response

    def process_exception(self, request: Request, exception: Exception, spider: Any = None):
        if self.error_run <= 0 or type(exception).__name__ not in HOST_ERRORS:
            return None
        if tls_failure(exception) is not None:
            return None  # a certificate refused says nothing of the host's load
        group = self.group_of(request)
        run = self._errors.get(group, 0) + 1
        if run < self.error_run:
            self._errors[group] = run
            return None
        self._errors.pop(group, None)
        self._hold(group, ERRORS, None, f"{run} {type(exception).__name__} in a row")
        return None  # the request itself is retried as any failure

    def _retry_after(self, response: Response) -> float | None:
        header = response.headers.get("Retry-After")
        if header is None:
            return None
        seconds = parse_retry_after(header)
        if seconds is None:
            self.stats.inc_value("hosts/retry_after_unreadable")
            return None
        if seconds > self.retry_after_max:
            self.stats.inc_value("hosts/retry_after_capped")
            return self.retry_after_max
        return seconds

    def _hold(self, group: str, kind: str, retry_after: float | None, why: str) -> bool:
        """Report a refusal, ban or run of errors; whether the cluster now holds
        ``group`` as a host that refuses (not for one page's Retry-After)."""
        self.stats.inc_value("hosts/bans" if kind == BAN else f"hosts/pushbacks/{kind}")
        # from a refusal on, this node reports the host's answers: the evidence
        # that tells a refusing host from a broken page
        history = self.answers.refused(group) if kind in (PUSH, AGAIN) else 0.0
        event = Event(group, kind, retry_after, history=history)
        try:
            held = self.hosts.report([event])
        except redis.RedisError as exc:
            self.health.failed(exc)
            # this node still holds the host; the others learn at its next answer
            self._held[group] = clock.now() + (retry_after or self.hosts.backoff.base)
            return kind not in (PUSH, AGAIN)
        self._take_bad_fields()
        host_level = False
        for state in held:
            if not state.until:
                continue
            if state.why in (PUSH, BAN, ERRORS):
                host_level = host_level or state.group == group
                if state.until > self._held.get(state.group, 0):
                    logger.info(
                        "%s refuses (%s): held for the cluster for %.1fs%s",
                        state.group,
                        why,
                        state.until - clock.now(),
                        f", its rate now {state.rate:.2f}/s" if state.rate else "",
                    )
                    self.stats.inc_value("hosts/held")
            self._held[state.group] = max(state.until, self._held.get(state.group, 0))
        if not host_level and kind in (PUSH, AGAIN):
            self.stats.inc_value("hosts/page_refusals")
        return host_level

    def _refused(self, request: Request, response: Response, group: str):
        """A 429/503: evidence of the host's state (a first refusal of this page),
        and the request waits, not counted as a failure: with its host when the
        evidence says the host refuses, else a backoff of its own (at least its
        Retry-After, which holds the host while it runs). A page refused again
        (after its wait, or fetched again by a retry or a recrawl) says more of
        itself than of its host: no evidence, only its Retry-After holds."""
        waits = request.meta.get(HOST_WAITS, 0)
        retry_after = self._retry_after(response)
        kind = AGAIN if waits or self.refused_urls.again(request.url) else PUSH
        host_level = self._hold(group, kind, retry_after, f"HTTP {response.status}")
        if request not in self.as_leased:
            return response  # not from the frontier (robots.txt): its own middleware decides
        if waits >= self.retry_times:
            self.stats.inc_value("hosts/waits_exhausted")
            return response  # the retry middleware takes it from here, as any failure
        until = self._held.get(group, clock.now())
        if retry_after is not None:  # what the host asked of this request, at least
            until = max(until, clock.now() + retry_after)
        if not host_level and retry_after is None:
            own = backoff_delay(waits + 1, self.hosts.backoff.base, self.hosts.backoff.cap)
            until = max(until, clock.now() + own)
        parked = self._park(request, until)
        parked.meta[HOST_WAITS] = waits + 1
        return parked

    async def _banned(self, request: Request, response: Response, group: str):
        self.stats.inc_value("bans/detected")
        retries = request.meta.get(BAN_RETRIES, 0) + 1
        if self.challenges is not None:
            # an answered challenge lifts the ban, not the reason for it: the
            # host is held and slowed all the same, its pages then come through
            await self.challenges.answer(request, response, group)
        self._hold(group, BAN, self._retry_after(response), f"banned, HTTP {response.status}")
        if request not in self.as_leased:
            # not IgnoreRequest: a robots.txt dropped on purpose would allow everything
            raise HostBanned(f"banned by {group}")
        if retries > self.ban_retry_times:
            self.stats.inc_value("bans/dead_lettered")
            now = clock.now()
            try:
                self.dead_letters.add_request(
                    self.crawler, request, kind="banned", error=f"banned (HTTP {response.status})",
                    status=response.status, first=request.meta.get(FIRST_FAILURE, now), last=now,
                )  # fmt: skip
            except redis.RedisError as exc:
                self.health.failed(exc)
                logger.error("could not dead-letter %s (banned): %s", request.url[:200], exc)
            raise IgnoreRequest(f"banned by {group}: dead-lettered")
        retry = self._park(request, self._held.get(group, clock.now()))
        retry.meta[BAN_RETRIES] = retries
        retry.meta.setdefault(FIRST_FAILURE, clock.now())
        return retry

    def _hear_holds(self) -> None:
        """This node's requests of a host another node had held wait with it."""
        try:
            heard = self.holds.poll()
        except redis.RedisError as exc:
            self.health.failed(exc)
            return
        if self.holds.bad:
            self.stats.inc_value("hosts/bad_holds", self.holds.bad)
            self.holds.bad = 0
        for group, until in heard:
            if until > self._held.get(group, 0):
                self.stats.inc_value("hosts/holds_heard")
                self._held[group] = until

    def _report_good(self) -> None:
        now = clock.now()
        for group in [group for group, until in self._held.items() if until < now]:
            del self._held[group]  # over
        if len(self._errors) > REFUSED_URLS:  # runs of hosts that never answered again
            self._errors.clear()
        events = self.answers.take_reports()
        if not events:
            return
        try:
            held = self.hosts.report(events)
        except redis.RedisError as exc:
            self.health.failed(exc)
            return
        self._take_bad_fields()
        for state in held:
            if state.why == "restored":
                self.stats.inc_value("hosts/restored")
                logger.info("%s answers well again: back to its own rate", state.group)

    def _take_bad_fields(self) -> None:
        if self.hosts.bad_fields:
            self.stats.inc_value("hosts/bad_state", self.hosts.bad_fields)
            self.hosts.bad_fields = 0
