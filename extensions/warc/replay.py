"""Archived fetches run through a spider again (``scrapy reparse``): the
spider's start is the archive, its download handler reads the archive, and no
request leaves the machine.

Each exchange becomes the request the frontier had stored with it (its
callback by name, its meta, its crawl; the spider's default callback when the
file has none) and the response as it came off the wire, so Scrapy's own
middlewares decode it as they did in the crawl. What never reached a callback
in the crawl is not replayed: a status outside 2xx, a robots.txt, a ban page.
Links the callbacks find are dropped and counted, or with ``--follow`` pushed
to the spider's start list for the cluster to fetch.
"""

from __future__ import annotations

import contextlib
import json
import logging
from itertools import islice
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from scrapy import Request, signals
from scrapy.core.downloader.handlers.base import BaseDownloadHandler
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Headers
from scrapy.responsetypes import responsetypes
from scrapy.utils.asyncio import run_in_thread

from extensions import connection
from extensions.bans import BanDetector
from extensions.exceptions import SerializationError
from extensions.frontier import seeding
from extensions.frontier.serializer import loads_request
from extensions.frontier.start_urls import EntryRules
from extensions.itemtimes import stamp_reparsed
from extensions.keys import SpiderKeys
from extensions.meta import CRAWL_ID
from extensions.warc.archive import Damage, Exchange, Originals, parse_date, read_exchanges
from extensions.warc.storage import LocalArchive, S3Archive

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator
    from datetime import datetime

    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)

EXCHANGE = "_warc_exchange"  # meta: the archived fetch a replayed request stands for
ARCHIVED_AT = "_warc_fetched_at"  # meta: when that fetch was made (its WARC-Date)
BATCH = 100  # exchanges read in the worker thread at a time


class ReplaySource:
    """The exchanges of a spider's files a reparse takes, oldest file first."""

    def __init__(
        self, archive: LocalArchive | S3Archive, spider: str, crawl: str | None = None,
        since: datetime | None = None,
    ):  # fmt: skip
        self.archive = archive
        self.spider = spider
        self.files = archive.names(spider)
        self.crawl = crawl
        self.since = since
        self.originals = Originals(self.files, spider, archive.fetch)
        self.damaged: list[Damage] = []

    def _taken(self, exchange: Exchange, stats: Any) -> bool:
        try:
            return self._wanted(exchange, stats)
        except ValueError:  # a WARC-Date or URL no writer of ours wrote
            stats.inc_value("reparse/skipped/unreadable")
            return False

    def _wanted(self, exchange: Exchange, stats: Any) -> bool:
        fields = exchange.fields
        if fields.get("spider", self.spider) != self.spider:
            stats.inc_value("reparse/skipped/other_spider")
        elif self.crawl is not None and fields.get("crawl", "") != self.crawl:
            stats.inc_value("reparse/skipped/crawl")
        elif self.since is not None and exchange.fetched < self.since:
            stats.inc_value("reparse/skipped/since")
        elif not 200 <= exchange.status < 300:
            stats.inc_value("reparse/skipped/status")
        elif fields.get("callback") == "none" or urlsplit(exchange.url).path == "/robots.txt":
            stats.inc_value("reparse/skipped/no_callback")  # robots.txt and the like
        else:
            return True
        return False

    def exchanges(self, stats: Any) -> Iterator[Exchange]:
        for name in self.files:
            path = self.archive.fetch(name)
            if path is None:
                continue  # gone since it was listed: said by the archive
            for found in read_exchanges(path):
                if isinstance(found, Damage):
                    self.damaged.append(found)
                    stats.inc_value("reparse/damaged_files")
                    logger.warning("%s: read up to byte %d; the rest cannot be read (%s)",
                                   found.path.name, found.offset, found.error)  # fmt: skip
                    continue
                stats.inc_value("reparse/archived")
                if not self._taken(found, stats):
                    continue
                if found.revisit_of is not None:
                    found.payload = self.originals.payload(*found.revisit_of)
                    if found.payload is None:
                        stats.inc_value("reparse/revisits_unresolved")
                        logger.warning("%s: the record its revisit refers to is not in "
                                       "the archive", found.url[:200])  # fmt: skip
                        continue
                    stats.inc_value("reparse/revisits")
                yield found

    def requests(self, spider: Any) -> Iterator[Request]:
        stats = spider.crawler.stats
        for exchange in self.exchanges(stats):
            request = None
            stored = exchange.fields.get("request")
            if stored:
                try:
                    request = loads_request(stored, spider)
                except SerializationError as exc:
                    stats.inc_value("reparse/requests_unreadable")
                    logger.warning("%s: archived request unreadable (%s); the default "
                                   "callback takes it", exchange.url[:200], exc)  # fmt: skip
            try:
                if request is None:
                    request = Request(exchange.url)
                meta = {**request.meta, EXCHANGE: exchange}
                yield request.replace(url=exchange.url, dont_filter=True, meta=meta)
            except ValueError as exc:  # a URL Scrapy refuses
                stats.inc_value("reparse/skipped/unreadable")
                logger.warning("an archived URL Scrapy refuses: %s", str(exc)[:200])


async def replayed_start(spider: Any, source: ReplaySource) -> AsyncIterator[Request]:
    """The spider's start in a reparse: the archive, read in a worker thread."""
    requests = source.requests(spider)

    def batch() -> list[Request]:
        return list(islice(requests, BATCH))

    while True:
        found = await run_in_thread(batch)
        if not found:
            return
        for request in found:
            yield request


class ReplayHandler(BaseDownloadHandler):
    """Every scheme's download handler in a reparse: the archive, never the wire."""

    async def download_request(self, request: Request) -> Response:
        exchange = request.meta.pop(EXCHANGE, None)
        if isinstance(exchange, Exchange):
            # a WARC-Date that does not parse: the items say now
            with contextlib.suppress(ValueError):
                request.meta[ARCHIVED_AT] = exchange.fetched
        stats = self.crawler.stats
        if not isinstance(exchange, Exchange):
            assert stats is not None
            stats.inc_value("reparse/not_archived")
            raise IgnoreRequest(
                f"{request.url[:200]} is not from the archive: reparse sends nothing"
            )
        headers = Headers(exchange.headers)
        body = exchange.payload or b""
        cls = responsetypes.from_args(headers=headers, url=exchange.url, body=body)
        flags = ["playwright"] if exchange.rendered else []  # as scrapy-playwright marks it
        return cls(url=exchange.url, status=exchange.status, headers=headers, body=body,
                   request=request, flags=flags)  # fmt: skip


class ReplayBanCheck:
    """A ban page never reached a callback in the crawl: nor in a reparse.
    Below Scrapy's decompression, as the crawl's ban check is."""

    def __init__(self, crawler: Crawler):
        self.crawler = crawler
        self.detector: BanDetector | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ReplayBanCheck:
        return cls(crawler)

    def process_response(self, request: Request, response: Response, spider: Any = None) -> Any:
        if self.detector is None:
            self.detector = BanDetector.from_settings(self.crawler.settings, self.crawler.spider)
        assert self.crawler.stats is not None
        if self.detector.is_ban(request, response):
            self.crawler.stats.inc_value("reparse/skipped/ban_page")
            raise IgnoreRequest(f"{response.url[:200]}: a ban page")
        self.crawler.stats.inc_value("reparse/responses")
        return response


class ReparseLinks:
    """The links a reparse's callbacks find: dropped and counted, or with
    ``REPARSE_FOLLOW`` pushed to the spider's start list as start entries
    (URL, priority, crawl), checked as ``scrapy seed`` checks them, in batches.
    The nodes take them with the spider's start callback."""

    def __init__(self, crawler: Crawler, follow: bool):
        self.crawler = crawler
        self.follow = follow
        self.waiting: list[str] = []
        crawler.signals.connect(self._flush, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ReparseLinks:
        return cls(crawler, crawler.settings.getbool("REPARSE_FOLLOW"))

    def process_spider_output(self, response: Response, result: Any, spider: Any = None) -> Any:
        fetched = response.meta.get(ARCHIVED_AT)
        for output in result:
            if isinstance(output, Request):
                self._link(output)
            else:
                stamp_reparsed(self.crawler, output, fetched)
                yield output

    async def process_spider_output_async(
        self, response: Response, result: Any, spider: Any = None
    ) -> Any:
        fetched = response.meta.get(ARCHIVED_AT)
        async for output in result:
            if isinstance(output, Request):
                self._link(output)
            else:
                stamp_reparsed(self.crawler, output, fetched)
                yield output

    def _link(self, request: Request) -> None:
        assert self.crawler.stats is not None
        if not self.follow:
            self.crawler.stats.inc_value("reparse/links_not_followed")
            return
        entry: dict[str, Any] = {"url": request.url}
        if request.priority:
            entry["priority"] = request.priority
        if request.meta.get(CRAWL_ID):
            entry["crawl"] = request.meta[CRAWL_ID]
        self.waiting.append(json.dumps(entry))
        if len(self.waiting) >= 1000:
            self._flush()

    def _flush(self, *args: Any, **kwargs: Any) -> None:
        if not self.waiting:
            return
        stats = self.crawler.stats
        assert stats is not None
        valid, refused = seeding.validate(
            self.waiting, EntryRules.from_settings(self.crawler.settings)
        )
        self.waiting = []
        for entry, reason in refused:
            stats.inc_value("reparse/links_refused")
            logger.warning("link not followed: %s: %s", entry[:200], reason)
        seeding.push(
            connection.client_for(self.crawler), SpiderKeys.for_crawler(self.crawler), valid
        )
        stats.inc_value("reparse/links_followed", len(valid))


def since_problem(text: str) -> str | None:
    try:
        parse_date(text)
    except ValueError:
        return f"--since {text!r} is not a date (2026-12-01 or 2026-12-01T08:00:00)"
    return None
