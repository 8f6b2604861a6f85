"""DNS shared by the cluster (``DNS_SHARED = True``): a host name is resolved by
the first node that needs it and its addresses kept in Redis (``NAME:dns:HOST``)
for every node, as long as the answer's TTL says (within ``DNS_CACHE_MIN_TTL``
and ``DNS_CACHE_MAX_TTL``), so a hundred nodes do not ask for one name a
hundred times: the first claims the name (``{"pending": 1}``), the others wait
for its answer (at most ``DNS_TIMEOUT``, then they ask themselves).

Lookups are Twisted Names' (in the reactor, never blocking it; unlike the
system's ``getaddrinfo`` they give the TTL), asked of ``DNS_SERVERS`` or of the
servers ``/etc/resolv.conf`` names. A name in the machine's ``/etc/hosts`` is
answered from it and not shared (another machine's file may say otherwise). A
name that does not exist (NXDOMAIN) is kept too, for ``DNS_NEGATIVE_TTL``, so
the cluster asks once; a server that fails (SERVFAIL) or does not answer is not
kept: the request fails as a DNS error, retried as any. A record that does not
parse (``records.parse``) is ignored, counted and resolved again. Redis is
read and written in a thread: its round trip never holds the reactor either.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import redis
from twisted.internet import defer, task, threads
from twisted.internet.error import DNSLookupError
from twisted.internet.interfaces import IResolverSimple
from twisted.names import client, dns, error, hosts
from twisted.python.filepath import FilePath
from zope.interface import implementer

from extensions.dns.records import NXDOMAIN, PENDING, Answer, parse

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy.crawler import Crawler
    from twisted.python.failure import Failure

    from extensions.keys import SpiderKeys

logger = logging.getLogger(__name__)

HOSTS_FILE = "/etc/hosts"
REASONS_KEPT = 10_000  # hosts whose last DNS failure is kept, to be told with their requests
CLAIM_POLL = 0.05  # seconds between two looks at a name another node is resolving


def servers_setting(value: Any) -> list[tuple[str, int]]:
    """DNS_SERVERS as (address, port) pairs: ``["192.0.2.53", "127.0.0.1:5353",
    "[2001:db8::53]:53"]``; raises ValueError naming a bad entry."""
    servers = []
    for entry in value or ():
        text = str(entry).strip()
        host, port = text, 53
        if text.startswith("["):
            host, _, rest = text[1:].partition("]")
            port = int(rest.removeprefix(":") or 53)
        elif text.count(":") == 1:
            host, _, number = text.partition(":")
            port = int(number)
        ipaddress.ip_address(host)  # a server is an address, not a name to resolve
        if not 0 < port < 65536:
            raise ValueError(f"{entry!r}: port out of range")
        servers.append((host, port))
    return servers


def dns_servers_problem(settings: Any, name: str) -> str | None:
    """What is wrong with DNS_SERVERS (``config.py`` runs this at start)."""
    try:
        servers_setting(settings.getlist(name))
    except ValueError as exc:
        return f'must be a list of "address[:port]" (an IP address, not a name): {exc}'
    return None


@implementer(IResolverSimple)
class ClusterResolver:
    def __init__(
        self,
        server: redis.Redis,
        keys: SpiderKeys,
        settings: Any,
        stats: Any,
        reactor: Any,
        check: Callable[[str], str | None] | None = None,
    ):
        self.server = server
        self.keys = keys
        self.stats = stats
        self.reactor = reactor
        self.min_ttl = settings.getint("DNS_CACHE_MIN_TTL")
        self.max_ttl = settings.getint("DNS_CACHE_MAX_TTL")
        self.negative_ttl = settings.getint("DNS_NEGATIVE_TTL")
        self.timeout = settings.getfloat("DNS_TIMEOUT")
        self.local_size = settings.getint("DNSCACHE_SIZE") if settings.getbool(
            "DNSCACHE_ENABLED") else 0  # fmt: skip
        #: DENY_PRIVATE_NETWORKS: why an address may not be fetched (None: it may)
        self.check = check
        #: names refused by ``check``, with why (the url policy middleware reads it)
        self.refused: dict[str, str] = {}
        servers = servers_setting(settings.getlist("DNS_SERVERS"))
        self.lookups = (
            client.Resolver(servers=servers, reactor=reactor)
            if servers
            else client.Resolver(resolv="/etc/resolv.conf", reactor=reactor)
        )
        # name -> (when it expires, monotonic; its answer): this node's copy
        self._local: OrderedDict[str, tuple[float, Answer]] = OrderedDict()
        #: why a host's last lookup failed ("NXDOMAIN", "SERVFAIL", ...): Twisted
        #: reports every failure as "no results"; the dead letters say this
        self.reasons: OrderedDict[str, str] = OrderedDict()
        # names being resolved here, and who else waits for them
        self._waiting: dict[str, list[defer.Deferred]] = {}

    def install_on_reactor(self) -> None:
        self.reactor.installResolver(self)

    def getHostByName(self, name: str, timeout: Any = ()) -> defer.Deferred:  # Twisted's name
        host = name.lower().rstrip(".")
        try:
            ipaddress.ip_address(host)
        except ValueError:
            pass
        else:
            return defer.succeed(host)
        local = self._local.get(host)
        if local and local[0] > time.monotonic():
            self._local.move_to_end(host)
            return self._answer(host, local[1])
        waiting: defer.Deferred = defer.Deferred()
        if host in self._waiting:
            self._waiting[host].append(waiting)
            return waiting
        self._waiting[host] = [waiting]
        from_file = _in_hosts_file(host)
        if from_file:
            self._settle(host, Answer(from_file), ttl=self.min_ttl)
        else:
            self._look_in_redis(host, polls_left=int(self.timeout / CLAIM_POLL))
        return waiting

    def _in_thread(self, function: Callable[..., Any], *args: Any) -> defer.Deferred:
        return threads.deferToThreadPool(
            self.reactor, self.reactor.getThreadPool(), function, *args
        )

    def _look_in_redis(self, host: str, polls_left: int) -> None:
        shared = self._in_thread(self._read, host, polls_left > 0)
        shared.addCallback(self._shared_or_lookup, host, polls_left)
        shared.addErrback(self._lookup_failed, host)

    # -- Redis: in a thread ------------------------------------------------------

    def _read(self, host: str, may_wait: bool) -> tuple[Answer | None, float, bool]:
        """The cluster's answer for ``host``, its TTL left and whether the record
        found did not parse; (pending, 0) while another node resolves it (and
        ``may_wait``); (None, 0): resolve it here, having claimed it when no node had."""
        bad = False
        key = self.keys.dns(host)
        try:
            pipe = self.server.pipeline(transaction=False)
            pipe.get(key)
            pipe.pttl(key)
            raw, ttl_ms = pipe.execute()
            answer = parse(raw)
            bad = raw is not None and answer is None
            if answer is not None and not answer.pending:
                return answer, max(ttl_ms, 0) / 1000, bad
            if answer is not None and may_wait:
                return answer, 0, bad
            # no answer, or one that does not parse (replaced): claim the name
            claim_ms = int((self.timeout + 1) * 1000)
            claimed = self.server.set(key, PENDING, px=claim_ms, nx=raw is None)
            if not claimed and may_wait:  # another node claimed it just now
                return Answer(pending=True), 0, bad
        except redis.RedisError as exc:
            logger.debug("DNS cache unreadable (%s): resolving %s here", exc, host)
        return None, 0, bad

    def _unclaim(self, host: str) -> None:
        try:
            key = self.keys.dns(host)
            if self.server.get(key) == PENDING.encode():
                self.server.delete(key)
        except redis.RedisError:
            pass  # the claim expires with the DNS timeout

    def _write(self, host: str, answer: Answer, ttl: int) -> None:
        try:
            self.server.set(self.keys.dns(host), answer.dumps(), ex=ttl)
        except redis.RedisError as exc:
            logger.debug("DNS cache unwritable (%s): %s kept on this node alone", exc, host)

    # -- the lookup ----------------------------------------------------------------

    def _shared_or_lookup(
        self, found: tuple[Answer | None, float, bool], host: str, polls_left: int
    ) -> None:
        answer, ttl, bad = found
        if bad:  # counted here: the stats are the reactor's, not the thread's
            self.stats.inc_value("dns/bad_records")
        if answer is not None and answer.pending:
            # another node resolves it: look again shortly (its answer is ours)
            later = task.deferLater(self.reactor, CLAIM_POLL, lambda: None)
            later.addCallback(lambda _: self._look_in_redis(host, polls_left - 1))
            return
        if answer is not None:
            self.stats.inc_value("dns/shared")
            self._settle(host, answer, ttl=max(int(ttl), 1))
            return
        self.stats.inc_value("dns/lookups")
        asked = self.lookups.lookupAddress(host, timeout=(self.timeout,))
        asked.addCallback(self._got_v4, host)
        asked.addErrback(self._lookup_failed, host)

    def _got_v4(self, result: tuple, host: str) -> defer.Deferred | None:
        addresses, ttl = _addresses(result[0], dns.A)
        if addresses:
            self._resolved(host, addresses, ttl)
            return None
        asked = self.lookups.lookupIPV6Address(host, timeout=(self.timeout,))
        asked.addCallback(self._got_v6, host)
        return asked

    def _got_v6(self, result: tuple, host: str) -> None:
        addresses, ttl = _addresses(result[0], dns.AAAA)
        if not addresses:
            self.stats.inc_value("dns/no_address")
            self._in_thread(self._unclaim, host)
            self._fail(host, DNSLookupError(f"{host}: no address in DNS (no A or AAAA record)"))
            return
        self._resolved(host, addresses, ttl)

    def _resolved(self, host: str, addresses: tuple[str, ...], ttl: int) -> None:
        ttl = min(max(ttl, self.min_ttl), self.max_ttl)
        answer = Answer(addresses)
        self._in_thread(self._write, host, answer, ttl)
        self._settle(host, answer, ttl)

    def _lookup_failed(self, failure: Failure, host: str) -> None:
        if failure.check(error.DNSNameError):
            self.stats.inc_value("dns/nxdomain")
            answer = Answer(error=NXDOMAIN)
            self._in_thread(self._write, host, answer, self.negative_ttl)
            self._settle(host, answer, self.negative_ttl)
            return
        if failure.check(error.DNSServerError):
            self.stats.inc_value("dns/servfail")
            why = f"{host}: the DNS server failed (SERVFAIL)"
        elif failure.check(defer.TimeoutError, error.DNSQueryTimeoutError):
            self.stats.inc_value("dns/timeouts")
            why = f"{host}: no DNS answer within {self.timeout:g}s"
        else:
            self.stats.inc_value("dns/errors")
            why = f"{host}: {failure.getErrorMessage()}"
        self._in_thread(self._unclaim, host)  # the next node to need it asks again
        self._fail(host, DNSLookupError(why))

    # -- answering the waiting -----------------------------------------------------

    def _settle(self, host: str, answer: Answer, ttl: float) -> None:
        if self.local_size:
            self._local[host] = (time.monotonic() + ttl, answer)
            self._local.move_to_end(host)
            while len(self._local) > self.local_size:
                self._local.popitem(last=False)
        for waiting in self._waiting.pop(host, []):
            self._answer(host, answer).chainDeferred(waiting)

    def _fail(self, host: str, exc: Exception) -> None:
        self._remember(host, str(exc))
        for waiting in self._waiting.pop(host, []):
            waiting.errback(exc)

    def _remember(self, host: str, why: str) -> None:
        self.reasons[host] = why
        self.reasons.move_to_end(host)
        if len(self.reasons) > REASONS_KEPT:
            self.reasons.popitem(last=False)

    def ttl_left(self, host: str) -> float | None:
        """Seconds this node keeps ``host``'s answer still (None: not kept here)."""
        local = self._local.get(host)
        return local[0] - time.monotonic() if local else None

    def reason(self, host: str) -> str | None:
        """Why ``host`` did not resolve, last time it did not."""
        return self.reasons.get(host)

    def _answer(self, host: str, answer: Answer) -> defer.Deferred:
        if answer.error:
            why = f"{host}: no such name ({answer.error})"
            self._remember(host, why)
            return defer.fail(DNSLookupError(why))
        address = answer.addresses[0]
        problem = self.check(address) if self.check else None
        if problem:
            if len(self.refused) < 10_000:
                self.refused[host] = problem
            return defer.fail(DNSLookupError(f"{host} refused: {problem}"))
        return defer.succeed(address)


def _in_hosts_file(host: str) -> tuple[str, ...]:
    """The machine's own answer for ``host`` (/etc/hosts), if it has one."""
    try:
        return tuple(hosts.searchFileForAll(FilePath(HOSTS_FILE), host.encode("idna")))
    except (OSError, UnicodeError):
        return ()


def _addresses(records: list, kind: int) -> tuple[tuple[str, ...], int]:
    """The addresses of one kind in an answer, IPv4 or IPv6, and their least TTL."""
    found, ttl = [], None
    for record in records:
        if record.type != kind:
            continue  # a CNAME on the way
        packed = record.payload.address
        family = socket.AF_INET if kind == dns.A else socket.AF_INET6
        found.append(socket.inet_ntop(family, packed))
        ttl = record.ttl if ttl is None else min(ttl, record.ttl)
    return tuple(found), int(ttl or 0)


def cluster_resolver(
    crawler: Crawler, keys: SpiderKeys, server: redis.Redis, check: Any
) -> ClusterResolver:
    from twisted.internet import reactor

    from extensions.runtime import set_state

    resolver = ClusterResolver(server, keys, crawler.settings, crawler.stats, reactor, check)
    set_state(crawler, ClusterResolver, resolver)
    return resolver


def resolver_of(crawler: Crawler) -> ClusterResolver | None:
    """The node's shared resolver (DNS_SHARED), or None."""
    from extensions.runtime import peek_state

    resolver: ClusterResolver | None = peek_state(crawler, ClusterResolver)
    return resolver


def failure_reason(crawler: Crawler, url_host: str) -> str | None:
    """Why the node's shared resolver could not resolve ``url_host`` (None: no
    DNS_SHARED, or no failure kept)."""
    resolver = resolver_of(crawler)
    return resolver.reason(url_host) if resolver is not None else None
