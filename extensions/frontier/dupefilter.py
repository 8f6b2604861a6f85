"""Redis dupefilter keyed on Scrapy's own request fingerprinter.

Fingerprints (14 bytes of Scrapy's) are kept in hashed buckets: a hash whose
2-byte fields each hold their fingerprints' 12-byte tails side by side, about
13 bytes of Redis memory per URL where scrapy-redis's hex strings in one set
take about 88. The distributed scheduler checks and records them in the same
Lua script that enqueues the request (``scripts/enqueue.lua``);
``request_seen`` serves standalone use with Scrapy's default scheduler.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from scrapy_redis.dupefilter import RFPDupeFilter

from extensions import compat, connection
from extensions.frontier.frontier import FINGERPRINT_BYTES
from extensions.frontier.redisops import load_script, run_named
from extensions.frontier.results import Added
from extensions.keys import SpiderKeys

if TYPE_CHECKING:
    import redis
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.utils.request import RequestFingerprinterProtocol

logger = logging.getLogger(__name__)


class RedisDupeFilter(RFPDupeFilter):
    logdupes: bool  # scrapy-redis's, set in its constructor
    logger = logger

    def __init__(
        self,
        server: redis.Redis,
        key: str,
        fingerprinter: RequestFingerprinterProtocol,
        debug: bool = False,
        stats=None,
    ):
        super().__init__(server, key=key, debug=debug)
        self.fingerprinter = fingerprinter
        self.stats = stats
        self._check: Any = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RedisDupeFilter:
        assert crawler.spidercls is not None
        server = connection.client_for(crawler, ping=True)
        keys = SpiderKeys.for_crawler(crawler)
        return cls(
            server,
            key=keys.dupefilter,
            fingerprinter=compat.fingerprinter_for(server, keys, crawler.request_fingerprinter),
            debug=crawler.settings.getbool("DUPEFILTER_DEBUG"),
            stats=crawler.stats,
        )

    @classmethod
    def from_settings(cls, settings, *, fingerprinter=None) -> RedisDupeFilter:
        """Standalone use, as scrapy-redis's ``RFPDupeFilter.from_settings``: a
        dupefilter of its own (``dupefilter:TIMESTAMP``) with Scrapy's fingerprinter."""
        from scrapy.utils.request import RequestFingerprinter

        return cls(
            connection.from_settings(settings),
            key=f"dupefilter:{int(time.time())}",
            fingerprinter=fingerprinter or RequestFingerprinter(),
            debug=settings.getbool("DUPEFILTER_DEBUG"),
        )

    def request_fingerprint(self, request: Request) -> bytes:
        return self.fingerprinter.fingerprint(request)[:FINGERPRINT_BYTES]

    def request_seen(self, request: Request) -> bool:
        if self._check is None:
            self._check = self.server.register_script(load_script("enqueue"))
        # the enqueue script with no request: it only checks and records the fingerprint
        result = run_named(
            self._check,
            {"dupefilter": self.key, "ready": "", "waiting": "", "frontier": ""},
            {"queue_prefix": "", "host_prefix": "", "data_prefix": "", "budget": 0,
             "level_prefix": self.key + ":"},
            items=[self.request_fingerprint(request), "", 0, ""],
        )  # fmt: skip
        return Added.of(result).new == 0

    def log(self, request: Request, spider: Spider) -> None:
        if self.debug:
            self.logger.debug("Filtered duplicate request: %(request)s", {"request": request})
        elif self.logdupes:
            self.logger.debug(
                "Filtered duplicate request %(request)s - no more duplicates will be "
                "shown (see DUPEFILTER_DEBUG to show all duplicates)",
                {"request": request},
            )
            self.logdupes = False
        if self.stats is not None:
            self.stats.inc_value("dupefilter/filtered")
