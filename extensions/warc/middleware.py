"""Writes each fetch to the node's WARC files as it comes off the wire.

Next to the downloader (at 960, above every middleware that sets a
header or answers a response): the request as sent (cookies, user agent,
signatures included) and the response as received, before decompression,
redirects and retries: a 3xx, a 429 and a ban page are archived too. Twisted
has taken the chunking off the body, so ``Transfer-Encoding`` is left out and
a ``Content-Length`` given. A metadata record says which crawl, node, lease and
server address it was, when, and the request as the frontier stores it (its
callback by name, its meta): what ``scrapy reparse`` runs the page through again.

With ``WARC_REVISITS`` (on by default) a 200 whose payload the crawl already
archived, on any node, is written as a ``revisit`` record (``digests.py``); if
Redis cannot say, the page is archived in full (``warc/digest_errors``). A new
payload enters the index once its record is on disk (``part.py``).

A write that fails (a full disk, a directory gone) leaves nothing of the page
in the file, is logged and counted (``warc/write_errors``), and holds the node
(``hold.py``): the page goes back to the frontier unparsed, for any node to
fetch and archive. (A sync that fails holds the node's leases: ``part.py``.)
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from http import HTTPStatus
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import redis
from scrapy import signals
from scrapy.http.request import NO_CALLBACK
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import threads
from twisted.internet.defer import Deferred, DeferredList

from extensions import clock, connection
from extensions.exceptions import SerializationError
from extensions.frontier.leased import leased_for
from extensions.frontier.serializer import dumps_request
from extensions.installed import require_addon, switched_off
from extensions.keys import SpiderKeys
from extensions.meta import CRAWL_ID
from extensions.runtime import runtime_of
from extensions.warc.captures import CaptureIndex
from extensions.warc.digests import PayloadIndex, payload_digest
from extensions.warc.files import WarcFiles
from extensions.warc.hold import hold_for
from extensions.warc.part import publish_payloads
from extensions.warc.state import warc_state
from extensions.warc.storage import LocalArchive, S3Archive, archive_for

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)

SKIPPED_HEADERS = {b"transfer-encoding"}  # the body is stored de-chunked
UNARCHIVED = "warc:unarchived"  # a response's flag: the page goes back to the frontier


def _pairs(headers: Any, skip: set[bytes] = SKIPPED_HEADERS) -> list[tuple[str, str]]:
    return [(name.decode("latin-1"), value.decode("latin-1"))
            for name, values in headers.items() if name.lower() not in skip
            for value in values]  # fmt: skip


def _located(original: dict[str, Any]) -> tuple[str, int, int] | None:
    """Where a digest entry's record lies, if it says (entries made before
    they did, or by another writer, do not)."""
    place = original.get("f"), original.get("o"), original.get("l")
    if isinstance(place[0], str) and all(type(n) is int for n in place[1:]):
        return place  # type: ignore[return-value]
    return None


class WarcMiddleware:
    def __init__(
        self, crawler: Crawler, archive: LocalArchive | S3Archive, max_size: int,
        payloads: PayloadIndex | None, captures: CaptureIndex | None = None,
    ):  # fmt: skip
        self.crawler = crawler
        self.payloads = payloads
        self.captures = captures
        self.stats = crawler.stats
        self.archive = archive
        self.directory = archive.writes_to
        self.uploads: set[Deferred] = set()
        self.max_size = max_size
        self.state = warc_state(crawler)
        self.state.payloads = payloads
        self.state.captures = captures
        self.hold = hold_for(crawler)
        self.as_leased = leased_for(crawler)
        crawler.signals.connect(self._closed, signals.spider_closed)
        crawler.signals.connect(self._opened, signals.spider_opened)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> WarcMiddleware:
        require_addon(crawler.settings, cls.__name__)
        settings = crawler.settings
        if not settings.getbool("WARC_ENABLED"):
            raise switched_off(cls, "WARC_ENABLED is off")
        archive = archive_for(settings)  # ConfigError: the node stops with one line
        payloads = None
        if settings.getbool("WARC_REVISITS"):
            keys = SpiderKeys.for_crawler(crawler)
            beyond = None
            if settings.get("MONGO_URI"):  # the index outgrows Redis there
                client = connection.mongo_client(settings.get("MONGO_URI"))
                name = f"{crawler.spidercls.name}_warc_digests"
                beyond = client[settings.get("MONGO_DATABASE")][name]
            prefix = keys.named("warc_digests", bucket="")
            payloads = PayloadIndex(connection.client_for(crawler), prefix,
                                    settings.getint("WARC_DIGESTS_IN_REDIS"), beyond)  # fmt: skip
        captures = None
        if settings.getint("WARC_CAPTURES_IN_REDIS"):
            keys = SpiderKeys.for_crawler(crawler)
            captures = CaptureIndex(connection.client_for(crawler),
                                    keys.named("warc_captures", bucket=""),
                                    settings.getint("WARC_CAPTURES_IN_REDIS"))  # fmt: skip
        return cls(crawler, archive, settings.getint("WARC_MAX_SIZE"), payloads, captures)

    def _files(self) -> WarcFiles:
        if self.state.files is None:
            spider = self.crawler.spider
            name = spider.name if spider is not None else "crawl"
            node = runtime_of(self.crawler).node_id or "node"
            self.state.files = WarcFiles(self.directory, name, node, self.max_size)
        return self.state.files

    def process_response(self, request: Request, response: Response, spider: Any = None) -> Any:
        if self.hold.waiting():
            return self._not_archived(request, response)
        body = response.body
        headers = _pairs(response.headers)
        if not response.headers.get(b"Content-Length"):
            headers.append(("Content-Length", str(len(body))))
        fields = {"spider": self._files().spider, "node": self._files().node,
                  "fetched": datetime.now(UTC).isoformat(timespec="milliseconds"),
                  "crawl": str(request.meta.get(CRAWL_ID) or ""),
                  "ip": str(response.ip_address or ""),
                  "lease": self.as_leased.lease_of(request)}  # fmt: skip
        rendered = "playwright" in response.flags  # scrapy-playwright's mark
        if rendered:  # the DOM the callbacks see: no bytes off the wire to keep
            fields.update(rendered="true", status=str(response.status))
        if request.callback is NO_CALLBACK:  # robots.txt and the like: for no callback
            fields["callback"] = "none"
        else:
            try:
                fields["request"] = dumps_request(request, self.crawler.spider).decode()
            except SerializationError:  # reparsed with the spider's default callback
                self.stats.inc_value("warc/requests_not_kept")
        known = response.status in HTTPStatus._value2member_map_
        reason = HTTPStatus(response.status).phrase if known else ""
        sent = _pairs(request.headers, set())
        if b"Host" not in request.headers:  # the HTTP client adds it after every middleware
            sent.insert(0, ("Host", urlsplit(request.url).netloc))
        try:
            files = self._files()
            records = files.records(
                response.url, request.method, sent, request.body or b"",
                f"{response.status} {reason}".strip(), headers, body, fields, rendered,
            )  # fmt: skip
            original = None
            if self.payloads is not None and response.status == 200 and body and not rendered:
                records[1], original = self._revisit_or_not(files, records[1], body)
            files.write_exchange(records)
        except OSError as exc:
            self._store_closed()
            self.stats.inc_value("warc/write_errors")
            self.hold.failed(f"{type(exc).__name__}: {exc}")
            logger.error("cannot write %s (%s): this node leases nothing for %.0f s, and what "
                         "it fetched goes back to the frontier", self.directory, exc,
                         self.hold.until - clock.now())  # fmt: skip
            return self._not_archived(request, response)
        if files.closed:  # rotated
            self._store_closed()
        if self.payloads is not None:
            self.payloads.kept(files.last_location)
        if self.captures is not None:
            # a revisit's payload is its original's record, wherever that lies
            where = files.last_location if original is None else _located(original)
            date = records[1].rec_headers.get_header("WARC-Date") or ""
            if where is not None:
                self.captures.stage(response.url, *where, date, response.status)
        if self.hold.wrote():
            logger.info("%s takes writes again: leasing again", self.directory)
        self.stats.inc_value("warc/pages")
        self.stats.inc_value("warc/records", len(records))
        return response

    def _not_archived(self, request: Request, response: Response) -> Any:
        """A page this node cannot archive is marked for ``ParkUnarchived``; one
        not from the frontier (robots.txt) goes on, unarchived."""
        if request in self.as_leased or request.meta.get("redirect_urls"):
            response.flags.append(UNARCHIVED)  # (a redirect's hop: its leased request's)
        else:
            self.stats.inc_value("warc/not_archived")
        return response

    def _revisit_or_not(
        self, files: WarcFiles, record: Any, body: bytes
    ) -> tuple[Any, dict[str, Any] | None]:
        """The response record, or a revisit of its payload's first record and
        that record's entry in the digest index."""
        assert self.payloads is not None
        digest = payload_digest(body)
        headers = record.rec_headers
        try:
            original = self.payloads.first(
                digest, headers.get_header("WARC-Target-URI"), headers.get_header("WARC-Date"),
                headers.get_header("WARC-Record-ID"),
            )  # fmt: skip
        except redis.RedisError as exc:
            self.stats.inc_value("warc/digest_errors")
            connection.health_for(self.crawler).failed(exc)
            return record, None
        except connection.mongo_error() as exc:
            self.stats.inc_value("warc/digest_errors")
            logger.warning("the digest index in MongoDB did not answer: %s", exc)
            return record, None
        if self.payloads.bad_records:
            self.stats.inc_value("warc/bad_digest_records", self.payloads.bad_records)
            self.payloads.bad_records = 0
        if original is None:
            return record, None
        self.stats.inc_value("warc/revisits")
        return files.revisit(record, digest, original), original

    async def _opened(self, spider: Any) -> None:
        # what a killed node left in the spool goes first (S3; nothing to do locally)
        await maybe_deferred_to_future(threads.deferToThread(self.archive.leftovers, spider.name))

    def _store_closed(self) -> None:
        files = self.state.files
        while files is not None and files.closed:
            upload = threads.deferToThread(self.archive.on_closed, files.closed.pop(0))
            self.uploads.add(upload)
            upload.addBoth(self._uploaded, upload)

    def _uploaded(self, result: Any, upload: Deferred) -> None:
        self.uploads.discard(upload)  # a failure is the archive's to log

    async def _closed(self, spider: Any) -> None:
        if self.state.files is not None:
            self.state.files.close()
            publish_payloads(self.crawler)
            self._store_closed()
        # the node stops once they are stored
        await maybe_deferred_to_future(DeferredList(list(self.uploads)))


class ParkUnarchived:
    """Sends a page the node could not archive back to the frontier, unparsed,
    for any node to fetch and archive (at 545, below the
    middlewares that account for an answer: pushback's send slots, the retry
    middleware), so its callback never runs on a page the archive lacks."""

    def __init__(self, crawler: Crawler):
        self.stats = crawler.stats
        self.as_leased = leased_for(crawler)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ParkUnarchived:
        if not crawler.settings.getbool("WARC_ENABLED"):
            raise switched_off(cls, "WARC_ENABLED is off")
        return cls(crawler)

    def process_response(self, request: Request, response: Response, spider: Any = None) -> Any:
        if UNARCHIVED not in response.flags:
            return response
        self.stats.inc_value("warc/parked")
        return self.as_leased.parked(request, clock.now())
