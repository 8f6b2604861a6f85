"""The cluster's one clock: the frontier Redis's, as this node last measured it.

Leases, send slots, holds and Retry-After windows are times one node writes
and others judge. A node whose own clock is a second behind would send into a
slot another node just used; one whose clock runs ahead would take live leases
back. So the scripts read Redis's ``TIME`` themselves (``scripts/_named.lua``),
and what a node computes in Python (a deadline, a hold's end, a heartbeat) is on
this clock: its own, plus the offset its heartbeats measure against Redis's
(``measure``, from ``cluster/checkpoint.py``).

Durations a node measures for itself (how long a download took) stay on
``time.monotonic``; only times other nodes read go through here.
"""

from __future__ import annotations

import logging
import time
from typing import Any

logger = logging.getLogger(__name__)

#: a node whose clock differs from Redis's by more than this (s) says so, once
SKEW_WARNING = 1.0
#: a measurement whose round trip took longer than this (s) is not taken: the
#: answer's moment within it is too uncertain
MAX_ROUND_TRIP = 0.25

#: a measurement is kept while no quicker one comes, for this long (s) at most:
#: the quickest round trip places Redis's moment best (the middle of a long one
#: may be off by half of it), and a clock drifts, so the held one ages out
KEEP_BEST = 60.0

_offset = 0.0
_warned = False
_best_round_trip: float | None = None
_best_at = 0.0


def now() -> float:
    """Seconds since the epoch by the frontier's clock."""
    return time.time() + _offset


def now_ms() -> int:
    """Milliseconds since the epoch by the frontier's clock (what the scripts'
    ``TIME`` reads and the node registry's scores hold)."""
    return int((time.time() + _offset) * 1000)


def skew() -> float:
    """Redis's clock minus this node's (s), as last measured: positive when
    this node's clock is behind."""
    return _offset


def measure(redis_time: tuple[int, int], sent: float, received: float) -> bool:
    """Take Redis's ``TIME`` (seconds, microseconds), asked at ``sent`` and
    answered at ``received`` (this node's ``time.time()``): Redis's moment is
    taken as the middle of the round trip, unless a quicker round trip is held
    (``KEEP_BEST``). Whether it was taken."""
    global _offset, _warned, _best_round_trip, _best_at
    round_trip = received - sent
    if not 0 <= round_trip <= MAX_ROUND_TRIP:
        return False
    held_for = time.monotonic() - _best_at
    if _best_round_trip is not None and round_trip > _best_round_trip and held_for < KEEP_BEST:
        return False  # a quicker one is held: its moment is surer
    _best_round_trip, _best_at = round_trip, time.monotonic()
    seconds, micros = redis_time
    offset = seconds + micros / 1e6 - (sent + received) / 2
    # within the round trip's own uncertainty an offset cannot be told from none
    # (one machine, or clocks in step): none, rather than a fraction of a ms of noise
    _offset = 0.0 if abs(offset) <= round_trip / 2 else offset
    if abs(_offset) > SKEW_WARNING and not _warned:
        _warned = True
        logger.warning(
            "this node's clock is %+.1f s off the frontier Redis's clock: the crawl's "
            "leases, send slots and holds run on Redis's clock, so nothing breaks, but "
            "the node's logs and files are stamped by its own (check its NTP)",
            -_offset,
        )
    return True


def measure_server(server: Any) -> bool:
    """This node's clock against ``server``'s (a redis.Redis, or a RedisCluster:
    one of its nodes): one round trip."""
    sent = time.time()
    answer = server.time()
    if isinstance(answer, dict):  # a cluster's, by node
        answer = next(iter(answer.values()))
    return measure(answer, sent, time.time())


def reset() -> None:
    """Back to this node's own clock (a process that leaves one frontier for another)."""
    global _offset, _warned, _best_round_trip
    _offset, _warned, _best_round_trip = 0.0, False, None
