"""Politeness above the host: a registered domain's hosts together
(``CLUSTER_DOMAIN_RATE``) and a server address's hosts together
(``CLUSTER_IP_RATE``), each in requests per second for the whole cluster.

The lease decides (``scripts/_pacing.lua`` ``host_levels``): a host is leased
only when its host, its domain and its address all have a free slot, and one
that finds its domain or address busy takes a turn in that level's line. What
the lease cannot know is a host's domain (the Public Suffix List is Python's)
and its address (DNS): a host without them waits, and the lease names it. This
part describes those hosts: their registered domain (``domains.py``) and, with
an address rate, the address the node's resolver gives, the cluster's with
``DNS_SHARED`` (on by default when ``CLUSTER_IP_RATE`` is set), written into the
host hash with when to look it up again (the answer's TTL), so a host whose
address changes moves to its new address's line then. A name with no address
(NXDOMAIN, no A or AAAA, or one ``DENY_PRIVATE_NETWORKS`` refuses) has its
queued requests dead-lettered once, with the reason (kind ``no_address``),
never fetched; it is looked up again after ``DNS_NEGATIVE_TTL``. A lookup that
fails (SERVFAIL, a timeout) holds the host, longer each time, as a pushback does,
and after LOOKUP_FAILURES_MAX in a row it is taken as having no address.
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import redis
from scrapy.exceptions import NotConfigured
from twisted.internet import defer
from twisted.python.failure import Failure

from extensions import clock, connection
from extensions.crawlid import crawl_fields, split_group
from extensions.dns.resolver import resolver_of
from extensions.frontier.domains import registered_domain
from extensions.frontier.frontier import LEASE_LEAD_MS
from extensions.frontier.hosts.claims import LevelClaims
from extensions.frontier.part import FrontierPart

if TYPE_CHECKING:
    from extensions.frontier.context import PartContext
    from extensions.frontier.results import Lease

logger = logging.getLogger(__name__)

#: the address field of a host with none (its name does not resolve)
NO_ADDRESS = "-"
#: the address field of a host whose lookup failed (it is held until 'ipx')
LOOKUP_FAILED = "?"
HOLD_BASE = 30.0  # seconds a host is held after its first failed lookup
HOLD_CAP = 600.0  # and at most, doubling with each failure in a row
FAILURES_REMEMBERED = 10_000
LOOKUP_FAILURES_MAX = 4  # failed lookups in a row (7.5 minutes held) before no address
#: the dead letters of requests whose host has no address (never fetched)
NO_ADDRESS_KIND = "no_address"
#: words of a failed lookup's reason that say the name has no address (not a
#: failure to look it up): ClusterResolver's and the url policy's
NO_ADDRESS_WORDS = ("NXDOMAIN", "no address in DNS", "refused:")


class HostLevels(FrontierPart):
    def __init__(self, context: PartContext, domain_rate: float, ip_rate: float):
        self.context = context
        self.stats = context.stats
        self.domain_rate = domain_rate
        self.ip_rate = ip_rate
        settings = context.settings
        self.min_ttl = settings.getint("DNS_CACHE_MIN_TTL")
        self.max_ttl = settings.getint("DNS_CACHE_MAX_TTL")
        self.negative_ttl = settings.getint("DNS_NEGATIVE_TTL")
        self._resolving: set[str] = set()
        # host -> failed lookups in a row, for the hold's length
        self._failures: OrderedDict[str, int] = OrderedDict()
        # a sharded frontier's levels are claimed apart from the lease (claims.py)
        self.claims = (
            LevelClaims(context.server, context.keys, context.node_id,
                        context.frontier.send_tolerance, LEASE_LEAD_MS, self.stats)
            if context.keys.shards > 1
            else None
        )  # fmt: skip

    @classmethod
    def from_context(cls, context: PartContext) -> HostLevels:
        settings = context.settings
        domain_rate = settings.getfloat("CLUSTER_DOMAIN_RATE")
        ip_rate = settings.getfloat("CLUSTER_IP_RATE")
        if domain_rate <= 0 and ip_rate <= 0:
            raise NotConfigured
        logger.info(
            "politeness above the host, cluster-wide: %s",
            ", ".join(
                f"{rate:g} requests/s per {what}"
                for what, rate in (("registered domain", domain_rate), ("address", ip_rate))
                if rate > 0
            ),
        )
        return cls(context, domain_rate, ip_rate)

    def admit_leases(self, leases: list[Lease], asked_ms: int) -> list[Lease]:
        if self.claims is None:
            return leases
        admitted, lost = self.claims.claim_leases(leases)
        if lost:  # their call failed after it may have run: given back at a heartbeat
            self.context.lease_failed(asked_ms)
        if self.claims.next_retry is not None:
            # a slot reserved is lost unless its host is leased in time for it
            self.context.look_again_in(max(self.claims.next_retry - clock.now(), 0.0))
        return admitted

    def leased(self) -> None:
        notes = self.context.frontier.host_notes
        if notes.unresolvable:
            self._dead_letter(notes.unresolvable)
            notes.unresolvable = []
        hosts = notes.undescribed - self._resolving
        notes.undescribed.clear()
        if not hosts:
            return
        if self.ip_rate <= 0:
            self._write({host: {"dom": registered_domain(host)} for host in hosts})
            return
        for host in hosts:
            self._resolving.add(host)
            looked_up = self._resolve(host)
            looked_up.addCallbacks(
                self._resolved, self._failed, callbackArgs=(host,), errbackArgs=(host,)
            )
            looked_up.addBoth(self._done, host)

    def _dead_letter(self, leases: list[tuple[bytes, bytes, str]]) -> None:
        """Requests of hosts with no address: dead-lettered with the reason, never
        fetched; their leases go at the next flush, after the records."""
        for member, data, why in leases:
            try:
                url = str(json.loads(data).get("url", ""))
            except (ValueError, AttributeError, RecursionError):
                url = ""
            group = connection.text(member.partition(b"\n")[0])
            crawl = crawl_fields(split_group(group)[1])
            self.context.dead_letter(kind=NO_ADDRESS_KIND, url=url, error=why,
                                     request=connection.text(data), **crawl)  # fmt: skip
            self.context.release([member])
        self.stats.inc_value("levels/dead_lettered", len(leases))

    def _resolve(self, host: str) -> defer.Deferred:
        resolver = resolver_of(self.context.crawler)
        if resolver is not None:
            return resolver.getHostByName(host)
        from twisted.internet import reactor

        return reactor.resolve(host)  # type: ignore[arg-type]

    def _resolved(self, address: str, host: str) -> None:
        self._failures.pop(host, None)
        resolver = resolver_of(self.context.crawler)
        ttl = resolver.ttl_left(host) if resolver is not None else None
        ttl = min(max(ttl or self.min_ttl, 1), self.max_ttl)
        self.stats.inc_value("levels/described")
        self._write({host: self._fields(host, address, ttl)})

    def _failed(self, failure: Failure, host: str) -> None:
        why = failure.getErrorMessage()
        resolver = resolver_of(self.context.crawler)
        reason = (resolver.reason(host) if resolver is not None else None) or why
        if any(words in reason for words in NO_ADDRESS_WORDS):
            self.stats.inc_value("levels/no_address")
            logger.info("%s has no address (%s): its requests are dead-lettered", host, reason)
            fields = self._fields(host, NO_ADDRESS, self.negative_ttl)
            self._write({host: {**fields, "ipr": reason[:500]}})
            return
        failures = self._failures.pop(host, 0) + 1
        if failures >= LOOKUP_FAILURES_MAX:  # the crawl does not wait for it for ever
            why = f"{reason} ({failures} lookups in a row failed)"
            logger.warning("%s: taken as having no address: %s", host, why)
            self.stats.inc_value("levels/no_address")
            fields = self._fields(host, NO_ADDRESS, self.negative_ttl)
            self._write({host: {**fields, "ipr": why[:500]}})
            return
        self._failures[host] = failures
        if len(self._failures) > FAILURES_REMEMBERED:
            self._failures.popitem(last=False)
        hold = min(HOLD_BASE * 2 ** (failures - 1), HOLD_CAP)
        self.stats.inc_value("levels/lookup_failed")
        logger.warning("%s: its address could not be looked up (%s): held %gs", host, reason, hold)
        self._write({host: self._fields(host, LOOKUP_FAILED, hold)})

    def _fields(self, host: str, address: str, ttl: float) -> dict[str, Any]:
        expires = int((clock.now() + ttl) * 1000)
        return {"dom": registered_domain(host), "ip": address, "ipx": expires}

    def _done(self, result: Any, host: str) -> None:
        self._resolving.discard(host)
        if isinstance(result, Failure):  # a bug here: the lease names the host again
            logger.error("describing %s failed: %s", host, result.getTraceback())

    def _write(self, described: dict[str, dict[str, Any]]) -> None:
        pipe = self.context.server.pipeline(transaction=False)
        for host, fields in described.items():
            keys = self.context.keys.shard(self.context.keys.shard_of(host))
            pipe.hset(keys.host(host), mapping=fields)  # type: ignore[arg-type]
        try:
            pipe.execute()
        except redis.RedisError as exc:
            # the lease names them again: described then
            logger.debug("host descriptions not written (%s)", exc)
