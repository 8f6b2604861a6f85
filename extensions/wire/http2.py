"""With ``HTTP2_ENABLED``: Scrapy's HTTP/2 handler (one connection per host, each
request a stream) for the hosts whose ALPN chooses h2, with the node's TLS policy;
HTTP/1.1 (``handlers.py``) for the others, remembered per host, and through a
proxy (Scrapy's HTTP/2 client has none). Its own module: the h2 library is
imported only by a node that asks for it."""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import TYPE_CHECKING

from scrapy.core.downloader.handlers.http2 import H2DownloadHandler
from scrapy.utils.httpobj import urlparse_cached

from extensions.wire.failures import not_http2
from extensions.wire.handlers import Http11Handler, policy_for

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)


class Http2Handler(H2DownloadHandler):
    """HTTP/2 where the server offers it, HTTP/1.1 where not."""

    #: Scrapy's HTTP/2 client connects through Twisted's HostnameEndpoint: the
    #: reactor's resolver (DNS_SHARED, DENY_PRIVATE_NETWORKS) sees every name
    RESOLVES_BY_THE_REACTOR = True

    def __init__(self, crawler: Crawler):
        super().__init__(crawler)
        self._context_factory = policy_for(crawler)  # type: ignore[assignment]
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
