"""Scrapy's download handlers for HTTPS with the node's TLS policy (``tls.py``):
``Http11Handler``, its HTTP/1.1 handler (a persistent pool per host), and with
``HTTP2_ENABLED``, ``Http2Handler``: Scrapy's HTTP/2 handler (one connection per
host, each request a stream) for the hosts whose ALPN chooses h2, HTTP/1.1 for
the others (remembered per host) and through a proxy (Scrapy's HTTP/2 client
has none). Installed by the add-on (``install.py``)."""

from __future__ import annotations

import logging
import weakref
from collections import OrderedDict
from typing import TYPE_CHECKING

from scrapy.core.downloader.handlers.http11 import HTTP11DownloadHandler
from scrapy.utils.httpobj import urlparse_cached

from extensions.wire.failures import not_http2
from extensions.wire.tls import TlsPolicy

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)

_POLICIES: weakref.WeakKeyDictionary[Crawler, TlsPolicy] = weakref.WeakKeyDictionary()


def policy_for(crawler: Crawler) -> TlsPolicy:
    """The crawler's one TLS policy, shared by its handlers (one session cache)."""
    policy = _POLICIES.get(crawler)
    if policy is None:
        policy = _POLICIES[crawler] = TlsPolicy.from_crawler(crawler)
    return policy


class Http11Handler(HTTP11DownloadHandler):
    """Scrapy's HTTP/1.1 handler, its HTTPS connections made by ``TlsPolicy``."""

    def __init__(self, crawler: Crawler):
        super().__init__(crawler)
        self._contextFactory = policy_for(crawler)  # type: ignore[assignment]


def _h2_handler() -> type:
    from scrapy.core.downloader.handlers.http2 import H2DownloadHandler  # needs h2

    return H2DownloadHandler


class Http2Handler(_h2_handler()):  # type: ignore[misc]
    """HTTP/2 where the server offers it, HTTP/1.1 where not."""

    #: Scrapy's HTTP/2 client connects through Twisted's HostnameEndpoint: the
    #: reactor's resolver (DNS_SHARED, DENY_PRIVATE_NETWORKS) sees every name
    RESOLVES_BY_THE_REACTOR = True

    def __init__(self, crawler: Crawler):
        super().__init__(crawler)
        self._context_factory = policy_for(crawler)
        self._http11 = Http11Handler(crawler)
        self._stats = crawler.stats
        #: host:port -> None: servers that would not speak HTTP/2 (bounded)
        self._plain: OrderedDict[str, None] = OrderedDict()
        self._plain_max = max(crawler.settings.getint("TLS_SESSIONS"), 1)

    async def download_request(self, request: Request) -> Response:
        parsed = urlparse_cached(request)
        netloc = parsed.netloc.lower()
        if parsed.scheme != "https" or request.meta.get("proxy") or netloc in self._plain:
            return await self._http11.download_request(request)
        try:
            response = await super().download_request(request)
        except Exception as exc:
            # (Scrapy's HTTP/2 client fails the request with the connection, whose
            # reason is lost on the way: the handshake's ALPN says it)
            if not (not_http2(exc) or self._context_factory.spoke(netloc) not in (None, b"h2")):
                raise
            self._plain[netloc] = None
            if len(self._plain) > self._plain_max:
                self._plain.popitem(last=False)
            if self._stats is not None:
                self._stats.inc_value("http2/hosts_without")
            logger.info("%s does not speak HTTP/2: HTTP/1.1 from now on", netloc)
            return await self._http11.download_request(request)
        if self._stats is not None:
            self._stats.inc_value("http2/responses")
        return response

    async def close(self) -> None:
        await super().close()
        await self._http11.close()
