"""Leases a live node holds in Redis without knowing it.

A lease whose reply the connection lost (Redis shut down or timed out after the
command ran, before its answer reached the node) is in the node's lease set,
and no request of the node's stands for it. The node is alive and beating, so
no other node takes those leases back; they would wait out
``FRONTIER_LEASE_TIMEOUT`` while the crawl, finished everywhere else, waited
for them.

A lease's score is its deadline, worked out by the node from its own clock when
it asked (``Frontier.lease_on``). A lease the node asked for and never heard of
has its deadline between the moment it asked and the moment the call failed,
plus the lease timeout: no lease the node knows of has one there (each lease
call is made and answered in turn, on the reactor's thread). At its heartbeat,
the node gives back those of its leases whose deadline falls in such a window
and that it does not hold, and forgets the windows once Redis has answered.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from extensions.cluster.checkpoint import now_ms
from extensions.frontier.redisops import execute, run_named

if TYPE_CHECKING:
    from extensions.frontier.frontier import Frontier

logger = logging.getLogger(__name__)

#: windows kept apart; past this many failed lease calls in one outage, they
#: merge into one window (wider, still only what this node does not hold)
MAX_WINDOWS = 64


class LostLeases:
    def __init__(self, frontier: Frontier, lease_timeout: float, stats: Any):
        self.frontier = frontier
        self.timeout_ms = int(lease_timeout * 1000)
        self.stats = stats
        self.windows: list[tuple[int, int]] = []

    def lease_failed(self, asked_ms: int) -> None:
        """A lease call that began at ``asked_ms`` failed: it may have run."""
        self.windows.append((asked_ms + self.timeout_ms, now_ms() + self.timeout_ms))
        if len(self.windows) > MAX_WINDOWS:
            self.windows = [(self.windows[0][0], self.windows[-1][1])]

    def give_back(self, holding: Callable[[], set[bytes]]) -> int:
        """Give back this node's leases from a failed lease call that it does not
        hold (``holding()``: every lease member it does, asked only when a call
        failed); how many went back. Raises Redis's errors: the windows are kept
        for the next turn."""
        if not self.windows:
            return 0
        held = holding()
        frontier = self.frontier
        low, high = self.windows[0][0], self.windows[-1][1]
        pipe = frontier.server.pipeline(transaction=False)
        for keys in frontier.shards:
            pipe.zrangebyscore(keys.leases(frontier.node_id), low, high, withscores=True)
        found = execute(pipe)
        given = 0
        for keys, leases in zip(frontier.shards, found, strict=True):
            lost = [
                member
                for member, deadline in leases
                if member not in held and any(a <= deadline <= b for a, b in self.windows)
            ]
            if lost:
                script_keys = {"leases": keys.leases(frontier.node_id), "ready": keys.ready,
                               "waiting": keys.waiting, "frontier": keys.frontier}  # fmt: skip
                args = {"queue_prefix": keys.queue(""), "data_prefix": keys.data("")}
                given += int(
                    run_named(
                        self.frontier.manifest.script("give_back"), script_keys, args, None, lost
                    )
                )
        self.windows = []
        if given:
            self.stats.inc_value("frontier/lost_leases_given_back", given)
            logger.warning(
                "gave back %d leases this node held without knowing it (a lease "
                "call failed after it ran); their requests are queued again",
                given,
            )
        return given
