"""Scrapy's download handlers for HTTPS with the node's TLS policy (``tls.py``):
``Http11Handler``, its HTTP/1.1 handler (a persistent pool per host), and with
``HTTP2_ENABLED``, ``Http2Handler``: Scrapy's HTTP/2 handler (one connection per
host, each request a stream) for the hosts whose ALPN chooses h2, HTTP/1.1 for
the others (remembered per host) and through a proxy (Scrapy's HTTP/2 client
has none). Installed by the add-on (``install.py``)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from typing import TYPE_CHECKING

from scrapy.core.downloader.handlers.http11 import HTTP11DownloadHandler
from scrapy.utils.httpobj import urlparse_cached
from scrapy.utils.reactor import is_asyncio_reactor_installed

from extensions.wire.tls import FIRST_WAIT, TlsPolicy

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
    """Scrapy's HTTP/1.1 handler, its HTTPS connections made by ``TlsPolicy``. A
    request to a host whose first handshake is under way waits for it (at most
    ``tls.FIRST_WAIT``), then resumes its session rather than pay a full one."""

    def __init__(self, crawler: Crawler):
        super().__init__(crawler)
        self._policy = policy_for(crawler)
        self._contextFactory = self._policy  # type: ignore[assignment]
        self._waits = is_asyncio_reactor_installed()

    async def download_request(self, request: Request) -> Response:
        parsed = urlparse_cached(request)
        if self._waits and parsed.scheme == "https" and parsed.hostname:
            first = self._policy.before_connecting(f"{parsed.hostname}:{parsed.port or 443}")
            if first is not None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(first.wait(), FIRST_WAIT)
        return await super().download_request(request)
