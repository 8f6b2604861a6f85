"""One state per host for the whole cluster: what it said, and how it is paced.

A refusal (429, 503) is first evidence, not a verdict: one page refused (a
broken URL, a page that fails twice and then works) waits alone, and its
``Retry-After`` holds the host while it runs, no more. The host itself is held
and slowed for every node only when the evidence says the host refuses: its
refusals of distinct pages reach ``HOST_BACKOFF_SHARE`` of its answers in a
window of about ``HOST_BACKOFF_WINDOW`` seconds (at least
``HOST_BACKOFF_MIN_REFUSALS`` of them), or, once it was slowed, refusals come
back at the pace it was slowed to. A ban page or a run of connection errors is
the host's at once. A host held waits in ``NAME:waiting`` until the hold ends,
for its ``Retry-After`` when it gives one (at most ``HOST_BACKOFF_MAX``), else
for an exponential backoff with jitter from ``HOST_BACKOFF_BASE``, one strike of
which is forgiven every ``HOST_BACKOFF_FORGIVE`` quiet seconds.

With ``CLUSTER_AUTOTHROTTLE_ENABLED`` its rate is cut to a little under what it
took (the share refused says by how much: at most halved, to at least
``CLUSTER_AUTOTHROTTLE_MIN_RATE``) and, every ``CLUSTER_AUTOTHROTTLE_STEP``
seconds it answers well with no refusal, climbs back: fast up to the rate it
took, then in probing steps of 1 % that double every second step, until it is
back at its configured rate. So against a rate limiter it settles just under
the limit, as TCP does under a congested link, while random refusals (the
packet loss of the web) never lower it. The state lives in the group's host
hash (``NAME:host:GROUP``: hold, why, strikes, arate, peak, the evidence en/er,
...), next to its queue, written by ``scripts/host_feedback.lua`` and read by
every lease.

Sends are paced too. A lease hands a paced group's requests out with a slot
each (ms), spaced by the group's interval plus ``CLUSTER_SEND_TOLERANCE`` of
it; a node sends a request no earlier than its slot and, if it comes to send
later than the tolerance allows (CPU-starved, say), asks Redis for a new slot
(``scripts/send_slot.lua``) rather than send next to the following request.
A request leased before another node's hold began may still go (a paced
group has at most a lead's worth leased ahead); a node's own buffered requests
of a held group wait. A group that pushed back is *watched*: its nodes report
its good answers, once a second, so its rate can climb. Well-behaved hosts cost
no round trip of their own.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import redis

from extensions import clock, connection, defaults
from extensions.frontier.frontier import LEASE_LEAD_MS
from extensions.frontier.hosts.claims import LevelClaims
from extensions.frontier.redisops import execute, fields, load_script, run_named
from extensions.keys import host_of

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

    from extensions.keys import SpiderKeys

logger = logging.getLogger(__name__)

#: what a host answered: a page refused (429, 503: evidence), a ban, a run of
#: errors, a page refused again (its own: only its Retry-After holds), good
PUSH, BAN, ERRORS, AGAIN, OK = "push", "ban", "errors", "again", "ok"


@dataclass(frozen=True)
class Backoff:
    """How the cluster answers hosts that push back (the settings, in seconds)."""

    base: float = defaults.HOST_BACKOFF_BASE
    cap: float = defaults.HOST_BACKOFF_MAX
    forgive: float = defaults.HOST_BACKOFF_FORGIVE
    adaptive: bool = defaults.CLUSTER_AUTOTHROTTLE_ENABLED
    min_rate: float = defaults.CLUSTER_AUTOTHROTTLE_MIN_RATE
    step: float = defaults.CLUSTER_AUTOTHROTTLE_STEP
    raise_by: float = 0.1
    share: float = defaults.HOST_BACKOFF_SHARE
    min_refusals: int = defaults.HOST_BACKOFF_MIN_REFUSALS
    window: float = defaults.HOST_BACKOFF_WINDOW
    tolerance: float = defaults.CLUSTER_SEND_TOLERANCE
    crawl_delay_max: float = defaults.CLUSTER_CRAWL_DELAY_MAX

    @classmethod
    def from_settings(cls, s: BaseSettings) -> Backoff:
        return cls(
            base=s.getfloat("HOST_BACKOFF_BASE"),
            cap=s.getfloat("HOST_BACKOFF_MAX"),
            forgive=s.getfloat("HOST_BACKOFF_FORGIVE"),
            adaptive=s.getbool("CLUSTER_AUTOTHROTTLE_ENABLED"),
            min_rate=s.getfloat("CLUSTER_AUTOTHROTTLE_MIN_RATE"),
            step=s.getfloat("CLUSTER_AUTOTHROTTLE_STEP"),
            tolerance=s.getfloat("CLUSTER_SEND_TOLERANCE"),
            crawl_delay_max=s.getfloat("CLUSTER_CRAWL_DELAY_MAX"),
            share=s.getfloat("HOST_BACKOFF_SHARE"),
            min_refusals=s.getint("HOST_BACKOFF_MIN_REFUSALS"),
            window=s.getfloat("HOST_BACKOFF_WINDOW"),
        )


@dataclass(frozen=True)
class Held:
    """A group the feedback held or slowed: until when (s since epoch; 0 when its
    adaptive rate was lifted), why, and its adaptive rate (None: its own)."""

    group: str
    until: float
    why: str
    rate: float | None


@dataclass
class Event:
    group: str
    kind: str  # PUSH, BAN, ERRORS, AGAIN or OK
    retry_after: float | None = None  # seconds the host asked for (PUSH, BAN)
    answers: int = 0  # OK: good answers counted
    latency: float = 0.0  # OK: their mean download latency, seconds
    history: float = 0.0  # answers of the host this node saw and had not reported


class HostStates:
    """The host-state scripts for one spider's frontier, for one node."""

    def __init__(self, server: redis.Redis, keys: SpiderKeys, backoff: Backoff | None = None):
        self.server = server
        self.keys = keys
        self.backoff = backoff or Backoff()
        self._feedback = server.register_script(load_script("host_feedback"))
        self._send_slot = server.register_script(load_script("send_slot"))
        self._address_cut = server.register_script(load_script("address_cut"))
        # a sharded frontier's levels are claimed apart (claims.py)
        self.claims = (
            LevelClaims(server, keys, "", self.backoff.tolerance, LEASE_LEAD_MS)
            if keys.shards > 1
            else None
        )
        self._random = random.Random()
        #: malformed host fields the scripts ignored since the last look
        self.bad_fields = 0

    def report(self, events: list[Event], now: float | None = None) -> list[Held]:
        """Tell the cluster what hosts answered; the groups this held or slowed.
        ``now`` (s since epoch) is the clock the scripts judge by."""
        b = self.backoff
        now_ms = int((clock.now() if now is None else now) * 1000)
        by_shard: dict[int, list[Event]] = {}
        for event in events:
            by_shard.setdefault(self.keys.shard_of(event.group), []).append(event)
        pipe = self.server.pipeline(transaction=False)
        for shard, part in by_shard.items():
            keys = self.keys.shard(shard)
            args: dict[str, Any] = {
                "now": now_ms, "host_prefix": keys.host(""), "base": int(b.base * 1000),
                "cap": int(b.cap * 1000), "forgive": int(b.forgive * 1000),
                "adaptive": int(b.adaptive), "floor_rate": b.min_rate,
                "window": int(b.window * 1000), "step": int(b.step * 1000),
                "raise": b.raise_by, "share": b.share, "min_refusals": b.min_refusals,
                "ip_prefix": keys.address(""), "levels_apart": int(self.claims is not None),
            }  # fmt: skip
            items: list[Any] = []
            for e in part:
                if e.kind == OK:
                    value, latency = e.answers + e.history, round(e.latency * 1000, 1)
                else:
                    value = -1 if e.retry_after is None else int(e.retry_after * 1000)
                    latency = 0
                items += [e.group, e.kind, value, latency, self._random.random(),
                          round(e.history, 3)]  # fmt: skip
            script_keys = {"ready": keys.ready, "waiting": keys.waiting, "rates": keys.rates,
                           "held": keys.held, "banned": keys.banned,
                           "holds": keys.holds}  # fmt: skip
            run_named(self._feedback, script_keys, args, pipe, items)
        held = []
        refused_at: list[Any] = []  # a sharded frontier's: told to the addresses
        for result in execute(pipe):
            answer = fields(result)
            self.bad_fields += int(answer["bad"])
            refused_at += [field for host in answer["address_refused"] for field in host]
            for group, until, why, rate in answer["held"]:
                held.append(
                    Held(
                        connection.text(group),
                        int(until) / 1000,
                        connection.text(why),
                        float(rate) if rate else None,
                    )
                )
        if refused_at:
            self._tell_addresses(refused_at, now_ms)
        return held

    def _tell_addresses(self, refused_at: list[Any], now_ms: int) -> None:
        """A sharded frontier's hosts held, told to their addresses (address_cut.lua).
        The holds are set already: a failed call loses the address's cut, never
        them, and the events are not reported twice."""
        try:
            # (a key of the addresses' slot, for a Redis Cluster to route the call by)
            run_named(self._address_cut, {"rates": self.keys.rates},
                      {"now": now_ms, "window": int(self.backoff.window * 1000),
                       "ip_prefix": self.keys.address("")}, None, refused_at)  # fmt: skip
        except redis.RedisError as exc:
            logger.warning("could not tell %d held hosts to their addresses: %s",
                           len(refused_at) // 4, exc)  # fmt: skip

    def ask_to_send(self, group: str, slot: float, window: float) -> tuple[str, float, float]:
        """('send', now, 0), ('wait', slot, window), ('later', when, 0) or ('hold', until,
        0): may a request of ``group`` whose lease gave it ``slot`` (s since epoch; 0:
        none), to be sent within ``window`` seconds after it, go now? Times in
        seconds since epoch; 'wait' took the slot given for it, 'later' took
        nothing: the request asks again at ``when``."""
        keys = self.keys.shard(self.keys.shard_of(group))
        b = self.backoff
        answer = fields(run_named(
            self._send_slot,
            {"rates": keys.rates, "crawl_delay": keys.crawl_delay},
            {"group": group, "now": clock.now_ms(), "slot": int(slot * 1000),
             "window": int(window * 1000), "host_prefix": keys.host(""),
             "delay_max": b.crawl_delay_max, "tolerance": b.tolerance, "lead": LEASE_LEAD_MS,
             "domain_prefix": keys.domain(""), "ip_prefix": keys.address(""),
             "levels_apart": int(self.claims is not None)},
        ))  # fmt: skip
        self.bad_fields += int(answer["bad"])
        at_text, _, window_text = connection.text(answer["at"]).partition(":")
        verdict, at, window = (
            connection.text(answer["verdict"]),
            int(at_text) / 1000,
            int(window_text or 0) / 1000,
        )
        if self.claims is None or not answer.get("claim") or verdict not in ("send", "wait"):
            return verdict, at, window
        # the host's slot taken: its levels' too (a sharded frontier's)
        [(claimed_at, claimed_window)] = self.claims.claim([(host_of(group), answer["claim"], at)])
        if claimed_window is None:
            return "later", claimed_at, 0.0
        if claimed_at <= clock.now():
            return "send", clock.now(), 0.0
        return "wait", claimed_at, claimed_window
