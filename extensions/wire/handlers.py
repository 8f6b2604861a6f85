"""Scrapy's download handlers for HTTPS with the node's TLS policy (``tls.py``):
``Http11Handler``, its HTTP/1.1 handler (a persistent pool per host), and with
``HTTP2_ENABLED``, ``Http2Handler``: Scrapy's HTTP/2 handler (one connection per
host, each request a stream) for the hosts whose ALPN chooses h2, HTTP/1.1 for
the others (remembered per host) and through a proxy (Scrapy's HTTP/2 client
has none). Installed by the add-on (``install.py``)."""

from __future__ import annotations

import logging
import weakref
from typing import TYPE_CHECKING

from scrapy.core.downloader.handlers.http11 import HTTP11DownloadHandler

from extensions.wire.tls import TlsPolicy

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

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
