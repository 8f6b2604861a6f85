"""The downloader side of ``extensions.urlpolicy``: a middleware for requests
that never pass through the scheduler (robots.txt), and, with
``DENY_PRIVATE_NETWORKS``, a resolver that refuses names resolving to
non-public addresses at connection time. The node's resolver is chosen here,
in one place: the cluster's (``DNS_SHARED``, extensions/dns), which checks the
addresses too, or Scrapy's with the check."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from scrapy.exceptions import CannotResolveHostError, IgnoreRequest, NotConfigured
from scrapy.resolver import CachingThreadedResolver
from twisted.internet.error import DNSLookupError

from extensions import connection
from extensions.dns.resolver import cluster_resolver
from extensions.keys import SpiderKeys
from extensions.urlpolicy import RefusedLog, UrlPolicy, address_problem

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)


class PublicAddressResolver(CachingThreadedResolver):
    """Scrapy's caching resolver that refuses names resolving to non-public
    addresses. The connection uses the very address checked here."""

    refused: dict[str, str]

    def getHostByName(self, name: str, timeout=()):  # Twisted names it
        d = super().getHostByName(name, timeout)
        d.addCallback(self._check, name)
        return d

    def _check(self, address: str, name: str) -> str:
        problem = address_problem(address)
        if problem:
            if len(self.refused) < 10_000:
                self.refused[name.lower()] = problem
            raise DNSLookupError(f"{name} refused: {problem}")
        return address


class UrlPolicyMiddleware:
    """Downloader middleware: refuses what ``UrlPolicy`` refuses (requests that
    did not pass through the scheduler, such as robots.txt), and turns a name
    refused by the resolver into an ignored request rather than a retried DNS
    failure. On only when ports or private networks are restricted."""

    def __init__(self, crawler: Crawler, policy: UrlPolicy):
        self.crawler = crawler
        self.policy = policy
        self.log = RefusedLog(crawler.stats, "urlpolicy/refused")
        #: the resolver that refuses non-public addresses: its ``refused`` names
        self.resolver: Any = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> UrlPolicyMiddleware:
        policy = UrlPolicy.from_settings(crawler.settings)
        shared_dns = crawler.settings.getbool("DNS_SHARED")
        if not (policy.ports or policy.deny_private or shared_dns):
            raise NotConfigured
        middleware = cls(crawler, policy)
        if shared_dns:
            check = address_problem if policy.deny_private else None
            keys = SpiderKeys.for_crawler(crawler)
            shared = cluster_resolver(crawler, keys, connection.client_for(crawler), check)
            shared.install_on_reactor()
            logger.info("DNS shared by the cluster: answers kept in Redis (%s)", keys.dns("HOST"))
            if policy.deny_private:
                middleware.resolver = shared
                logger.info("DENY_PRIVATE_NETWORKS: private, loopback and link-local "
                            "addresses refused")  # fmt: skip
        elif policy.deny_private:
            from twisted.internet import reactor

            resolver = PublicAddressResolver.from_crawler(crawler, reactor)
            resolver.refused = {}
            resolver.install_on_reactor()
            middleware.resolver = resolver
            logger.info("DENY_PRIVATE_NETWORKS: private, loopback and link-local addresses refused")
        return middleware

    def process_request(self, request: Request, spider: Any = None) -> None:
        if not (self.policy.ports or self.policy.deny_private):
            return  # on for DNS_SHARED alone
        problem = self.policy.problem(request.url)
        if problem:
            self.log.refused(request.url, *problem)
            raise IgnoreRequest(problem[1])

    def process_exception(self, request: Request, exception: Exception, spider: Any = None):
        # Scrapy 2.19 wraps Twisted's DNSLookupError in CannotResolveHostError.
        if self.resolver is None or not isinstance(
            exception, (DNSLookupError, CannotResolveHostError)
        ):
            return None
        host = (urlsplit(request.url).hostname or "").lower()
        problem = self.resolver.refused.get(host)
        if problem is None:
            return None
        self.log.refused(request.url, "private", f"{host} resolves to a non-public {problem}")
        raise IgnoreRequest(problem)
