"""The levels above hosts on a sharded frontier: slots claimed apart from the lease.

A lease runs in its host's shard; a registered domain's hosts, and an address's,
are in many shards. So with ``FRONTIER_SHARDS`` > 1 the lease paces a host at
its levels' rates without reading the levels (``lease.lua`` ``levels_apart``)
and names each request's domain and address; the node then claims the send
slots of the request's host, domain and address together, in the one slot
where all of them are (``scripts/claim_levels.lua``; under ``REDIS_CLUSTER``
the crawl's own hash tag), one call a lease. A request whose slot is further
off goes back to its queue with that slot reserved for its host, which waits
until then: the hosts of a busy address take its slots in the order they asked,
whatever shards they are in. A request sent later than its slot allowed, and
robots.txt, claim theirs the same way (``HostStates.ask_to_send``).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import TYPE_CHECKING, Any

import redis

from extensions import clock, connection
from extensions.frontier.redisops import execute, fields, load_script, run_named
from extensions.frontier.results import Lease
from extensions.keys import host_of

if TYPE_CHECKING:
    from extensions.keys import SpiderKeys

logger = logging.getLogger(__name__)

#: ms before a reserved slot its host is leased again and may take it: a lease
#: a busy node makes a moment late still meets its slot, which would otherwise
#: be lost to every host of the level (the request waits for it in the node)
RESERVATION_EARLY_MS = 1000
#: a claim's answer: the send slot and window (s since epoch, s), or a refusal
#: with when its host is leased again (s since epoch) and a window of None
Claimed = tuple[float, float | None]


def group_host(lease: Lease) -> str:
    return host_of(connection.text(lease.member.partition(b"\n")[0]))


class LevelClaims:
    def __init__(self, server: redis.Redis, keys: SpiderKeys, node_id: str, tolerance: float,
                 lead_ms: int, stats: Any = None):  # fmt: skip
        self.server = server
        self.keys = keys  # the crawl's own keys: the levels are not in a shard
        self.node_id = node_id
        self.tolerance = tolerance
        self.lead_ms = lead_ms
        self.stats = stats
        self.bad_fields = 0
        #: when the first slot reserved by the last claim_leases comes (s since epoch)
        self.next_retry: float | None = None
        self._claim = server.register_script(load_script("claim_levels"))
        self._give_back = server.register_script(load_script("give_back"))

    def claim(self, requests: list[tuple[str, bytes, float]]) -> list[Claimed]:
        """Claim the send slots of ``requests`` (host, the lease's claim field
        'DOMAIN ADDRESS HOST_INTERVAL_MS', the lease's slot in s or 0), in order.
        Raises Redis's errors."""
        items: list[Any] = []
        for host, claim, slot in requests:
            dom, ip, interval = [*connection.text(claim).split(" "), "", "", "0"][:3]
            items += [host, dom, ip, int(slot * 1000), interval]
        keys = self.keys
        answer = fields(run_named(
            self._claim,
            {"rates": keys.rates},
            {"now": clock.now_ms(), "tolerance": self.tolerance, "lead": self.lead_ms,
             "early": RESERVATION_EARLY_MS, "pace_prefix": keys.pace(""),
             "domain_prefix": keys.domain(""), "ip_prefix": keys.address("")},
            None,
            items,
        ))  # fmt: skip
        self.bad_fields += int(answer["bad"])
        self._count("levels/reservations_missed", int(answer["missed"]))
        claimed: list[Claimed] = []
        for slot in answer["slots"]:
            at, _, window = connection.text(slot).partition(":")
            if at == "R":
                claimed.append((int(window) / 1000, None))
            else:
                claimed.append((int(at) / 1000, int(window) / 1000))
        return claimed

    def claim_leases(self, leases: list[Lease]) -> tuple[list[Lease], bool]:
        """The leases with their slots at their levels; those whose slot is
        further off are given back, their hosts waiting for the slot reserved.
        Returns (the leases to send, whether some were lost on the way: their
        call failed, after it may have run, so the node gives them back as
        leases it does not hold)."""
        asked = [lease for lease in leases if lease.claim]
        self.next_retry = None
        if not asked:
            return leases, False
        try:
            claimed = self.claim([(group_host(lease), lease.claim, lease.slot) for lease in asked])
        except (redis.RedisError, ValueError) as exc:  # ValueError: a reply not as written
            logger.warning("could not claim %d leases' slots at their levels: %s", len(asked), exc)
            return [lease for lease in leases if not lease.claim], True
        answers = {lease.member: answer for lease, answer in zip(asked, claimed, strict=True)}
        sent: list[Lease] = []
        refused: list[tuple[bytes, float]] = []
        for lease in leases:
            if not lease.claim:
                sent.append(lease)
                continue
            at, window = answers[lease.member]
            if window is None:
                refused.append((lease.member, at))
            else:
                sent.append(lease._replace(slot=at, window=window))
        self._count("levels/claimed", len(asked) - len(refused))
        if not refused:
            return sent, False
        self._count("levels/refused", len(refused))
        self.next_retry = min(until for _, until in refused)
        try:
            self.give_back(refused)
        except redis.RedisError as exc:  # the node gives them back as lost leases
            logger.warning("could not give back %d leases a level refused: %s", len(refused), exc)
            return sent, True
        return sent, False

    def give_back(self, refused: list[tuple[bytes, float]]) -> None:
        """Leases back to their queues, each host waiting until its time (s)."""
        by_shard: defaultdict[int, list[Any]] = defaultdict(list)
        for member, until in refused:
            group = connection.text(member.partition(b"\n")[0])
            by_shard[self.keys.shard_of(group)] += [member, int(until * 1000)]
        pipe = self.server.pipeline(transaction=False)
        for index, items in by_shard.items():
            keys = self.keys.shard(index)
            run_named(
                self._give_back,
                {"leases": keys.leases(self.node_id), "ready": keys.ready,
                 "waiting": keys.waiting, "frontier": keys.frontier},
                {"queue_prefix": keys.queue(""), "data_prefix": keys.data(""),
                 "host_prefix": keys.host(""), "held": 1},
                pipe,
                items,
            )  # fmt: skip
        execute(pipe)

    def _count(self, key: str, n: int) -> None:
        if self.stats is not None and n:
            self.stats.inc_value(key, n)
