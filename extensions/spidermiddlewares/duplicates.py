"""A page is stored once, whatever URL it came under: content duplicates.

The normalizer chain (``extensions/urlnorm``) makes one URL of the variants it
can tell from the URL alone; this middleware finds the rest from the page. Each
200 answer's content digest (``content_digest``: the body without its scripts,
styles and comments, with dates and times masked and white space collapsed, so
what changes on every load does not make a page new) is kept for the crawl in
Redis, with the URL that first had it. A page whose digest another URL had
first is a duplicate: with ``CONTENT_DUPLICATES = "drop"`` (off by default) its
callback's items are dropped, with ``"mark"`` they carry ``duplicate_of``; its
links are never followed again. The same URL fetched again (a retry, a recrawl,
a node that died before its lease ended) is never its own duplicate, so a page
is not lost to a kill -9 between the digest and its items.

One round trip a page, in a thread (a script: HSETNX, then HGET), into
``NAME:digests:BUCKET`` (65,536 buckets, 8 bytes of digest and the URL a page);
a page new by its digest takes a second for its near duplicates
(``nearduplicates.py``, CONTENT_NEAR_DUPLICATES), marked by default.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import redis
from scrapy import Request
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import defer, threads

from extensions import connection
from extensions.frontier.domains import registered_domain
from extensions.frontier.params import ParameterLearning
from extensions.installed import require_addon, switched_off
from extensions.keys import SpiderKeys
from extensions.meta import CRAWL_ID
from extensions.settingchecks import choice, flag, number
from extensions.signals import params_learned
from extensions.spidermiddlewares.marking import ItemMarker
from extensions.spidermiddlewares.nearduplicates import (
    DISTANCE_MAX,
    NearIndex,
    fingerprint,
    words,
)

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)

SETTING_CHECKS = {
    "CONTENT_DUPLICATES": choice("drop", "mark", "off"),
    "CONTENT_NEAR_DUPLICATES": choice("drop", "mark", "off"),
    "CONTENT_NEAR_DISTANCE": number(int, 0, DISTANCE_MAX),
    "CONTENT_NEAR_MIN_WORDS": number(int, 1),
    "URL_LEARN_PARAMETERS": flag,
    "URL_LEARN_PAIRS": number(int, 1),
}

DUPLICATE_OF = "duplicate_of"  # the field a marked item carries
NEAR_DUPLICATE_OF = "near_duplicate_of"  # and a near duplicate's
NEAR_OF = "_near_duplicate_of"  # response.meta: the page it nearly repeats, for its output
URL_KEPT = 2000  # characters of the first URL kept with a digest
TURN_WAIT_MAX = 120.0  # seconds a page's answer waits at most for the one before it

# What a page changes on every load, not what it says. Each pattern starts with
# a literal, which the regex engine finds fast: a digest costs under a millisecond
# on a 100 KiB page (patterns starting with a digit class cost ten times that).
BLOCKS = re.compile(rb"<(?:script|style)\b.*?</(?:script|style)\s*>|<!--.*?-->", re.I | re.S)
# a date with its time of day, and a time with its seconds: a moment, such as a
# page says it was made at; a date alone names a day (a calendar, an archive)
DATE = re.compile(rb"-\d\d-\d\d[T ]\d\d?:\d\d(?::\d\d)?(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?")
CLOCK = re.compile(rb":\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?")
EPOCH = re.compile(rb"1[5-9]\d{8}(?:\d{3})?")  # Unix time, 2017 to 2033, s or ms
DIGITS = b"0123456789"


def _volatile_spans(body: bytes) -> list[tuple[int, int]]:
    spans = []
    for pattern in (DATE, CLOCK):
        for match in pattern.finditer(body):
            start = match.start()
            while start > 0 and body[start - 1] in DIGITS:  # the year, the hour
                start -= 1
            spans.append((start, match.end()))
    for match in EPOCH.finditer(body):
        start, end = match.span()
        if (start == 0 or body[start - 1] not in DIGITS) and (
            end == len(body) or body[end] not in DIGITS
        ):
            spans.append((start, end))
    return spans


def stable_content(body: bytes) -> bytes:
    """The body without what changes on every load: scripts, styles, comments,
    moments (a date with its time, a time with its seconds, a Unix time), and
    white space."""
    return b"".join(stable_text(body).split())


def stable_text(body: bytes) -> bytes:
    """The body without its scripts, styles, comments and moments."""
    body = BLOCKS.sub(b"", body)
    spans = _volatile_spans(body)
    if spans:
        kept, position = [], 0
        for start, end in sorted(spans):
            if start > position:
                kept.append(body[position:start])
            position = max(position, end)
        kept.append(body[position:])
        body = b"".join(kept)
    return body


def content_digest(body: bytes, crawl: str = "") -> bytes:
    """10 bytes that two loads of one page share, and two pages that differ in
    anything but their volatile parts do not."""
    return stable_digest(stable_text(body), crawl)


def stable_digest(stable: bytes, crawl: str = "") -> bytes:
    """``content_digest`` of a body's ``stable_text``."""
    digest = hashlib.blake2b(crawl.encode() + b"\0", digest_size=10)  # each crawl its own
    digest.update(b"".join(stable.split()))
    return digest.digest()


# one command a page: the first URL of a digest, this page's if it is new
FIRST_URL = """
redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2])
return redis.call('HGET', KEYS[1], ARGV[1])
"""


class ContentDigests:
    """The crawl's digests in Redis: which URL had each content first."""

    def __init__(self, server: redis.Redis, keys: SpiderKeys):
        self.server = server
        self.prefix = keys.digests_prefix
        self._first_url = server.register_script(FIRST_URL)

    def first_url(self, digest: bytes, url: str) -> str:
        """The URL that had ``digest`` first: ``url`` itself when it is new.
        Raises redis.RedisError."""
        key = f"{self.prefix}{digest[:2].hex()}"
        first = self._first_url(keys=[key], args=[digest[2:], url[:URL_KEPT]])
        return connection.text(first) if first is not None else url


class ContentDuplicatesMiddleware:
    in_thread: Any = staticmethod(threads.deferToThread)  # tests run it in place

    def __init__(self, crawler: Crawler, mode: str):
        self.crawler = crawler
        self.stats = crawler.stats
        self.mode = mode
        self.health = connection.health_for(crawler)
        server, keys = connection.client_for(crawler), SpiderKeys.for_crawler(crawler)
        self.digests = ContentDigests(server, keys)
        settings = crawler.settings
        self.near_mode = settings.get("CONTENT_NEAR_DUPLICATES")
        self.near = (
            None if self.near_mode == "off"
            else NearIndex(server, keys.near_prefix, settings.getint("CONTENT_NEAR_DISTANCE"))
        )  # fmt: skip
        self.near_min_words = settings.getint("CONTENT_NEAR_MIN_WORDS")
        self.learning = (
            ParameterLearning(server, keys, crawler.settings.getint("URL_LEARN_PAIRS"))
            if crawler.settings.getbool("URL_LEARN_PARAMETERS")
            and crawler.settings.getbool("URL_NORMALIZE_ENABLED")
            else None
        )
        self.marker = ItemMarker(self.stats, "duplicates/unmarkable", logger)
        #: fired once the last response asked about has had its answer
        self._turn: defer.Deferred[None] | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ContentDuplicatesMiddleware:
        require_addon(crawler.settings, cls.__name__)
        mode = crawler.settings.get("CONTENT_DUPLICATES")
        if mode == "off":
            raise switched_off(cls, "CONTENT_DUPLICATES is off")
        return cls(crawler, mode)

    def _first_url(self, response: Response) -> tuple[str, str | None, dict[str, Any] | None]:
        """In a thread: the URL that had this response's content first, the
        URL of the first page of its domain it nearly repeats (or None), and
        what the page taught of its host's query parameters."""
        stable = stable_text(response.body)
        crawl = response.meta.get(CRAWL_ID) or ""
        digest = stable_digest(stable, crawl)
        first = self.digests.first_url(digest, response.url)
        near = None
        if self.near is not None and first == response.url[:URL_KEPT]:
            near = self._near_url(response.url, stable, crawl)
        learned = self.learning.learn(response.url, digest) if self.learning else None
        return first, near, learned

    def _near_url(self, url: str, stable: bytes, crawl: str) -> str | None:
        assert self.near is not None
        page_words = words(stable)
        if len(page_words) < self.near_min_words:
            return ""  # too few words to tell (counted in the reactor: stats are not shared)
        try:
            host = urlsplit(url).hostname or ""
        except ValueError:  # a URL no page could have come from: no domain to look in
            return None
        domain = f"{crawl}:{registered_domain(host)}" if crawl else registered_domain(host)
        near = self.near.nearest(domain, fingerprint(page_words), url)
        return None if near == url[:URL_KEPT] else near

    async def duplicate_of(self, response: Response) -> str | None:
        """The URL whose page this response repeats, or None (a new page, an
        answer other than 200, or Redis away: then it is taken as new); a near
        duplicate's first page is kept in ``response.meta`` (NEAR_OF). The
        digest and its round trips run in a thread, so a Redis far away slows no
        other page; the answers are taken in the order the responses came, so
        their links are queued in the order they were found."""
        if response.status != 200 or not response.body:
            return None
        started = time.monotonic()
        asked = self.in_thread(self._first_url, response)
        before, self._turn = self._turn, defer.Deferred()
        turn = self._turn
        try:
            if before is not None:
                await self._after(before)
            first, near, learned = await maybe_deferred_to_future(asked)
        except redis.RedisError as exc:
            self.health.failed(exc, started)
            self.stats.inc_value("duplicates/unchecked")
            return None
        finally:
            if self._turn is turn:
                self._turn = None  # nothing waits behind this one
            turn.callback(None)
        self.stats.inc_value("duplicates/checked")
        if learned:
            self._learned(response.url, learned)
        if near == "":
            self.stats.inc_value("duplicates/near_too_few_words")
            near = None
        if near is not None:
            self.stats.inc_value("duplicates/near_pages")
            logger.debug("%s nearly repeats %s", response.url[:200], near[:200])
            if self.near_mode == "drop":
                return near
            response.meta[NEAR_OF] = near
        if first == response.url[:URL_KEPT]:
            return None
        self.stats.inc_value("duplicates/pages")
        logger.debug("%s has the content of %s", response.url[:200], first[:200])
        return first

    async def _after(self, before: defer.Deferred[None]) -> None:
        """Wait for the answer before this one, TURN_WAIT_MAX at most: the order
        of links is worth less than a node that never waits for good."""
        from twisted.internet import reactor

        try:
            await maybe_deferred_to_future(before.addTimeout(TURN_WAIT_MAX, reactor))
        except defer.TimeoutError:
            self.stats.inc_value("duplicates/turn_timeouts")

    def _learned(self, url: str, learned: dict[str, Any]) -> None:
        host = urlsplit(url).hostname
        for name in learned["learned"]:
            self.stats.inc_value("urlnorm/learned")
            logger.info("%s: the query parameter %r never changed a page: dropped from now on",
                        host, name[:64])  # fmt: skip
        for name in learned["undone"]:
            self.stats.inc_value("urlnorm/unlearned")
            logger.info("%s: the query parameter %r changed a page: kept from now on",
                        host, name[:64])  # fmt: skip
        if learned["bad"]:
            self.stats.inc_value("urlnorm/bad_decisions", learned["bad"])
        if learned["learned"] or learned["undone"]:
            self.crawler.signals.send_catch_log(
                signal=params_learned, host=host, learned=learned["learned"],
                undone=learned["undone"],
            )  # fmt: skip

    def _filtered(self, output: Any, first: str) -> Any | None:
        if isinstance(output, Request):
            self.stats.inc_value("duplicates/links_dropped")
            return None
        if self.mode == "drop":
            self.stats.inc_value("duplicates/items_dropped")
            return None
        return self._marked(output, DUPLICATE_OF, first)

    def _marked(self, output: Any, field: str, first: str) -> Any:
        near = field == NEAR_DUPLICATE_OF
        counted = "duplicates/near_items_marked" if near else "duplicates/items_marked"
        return self.marker.mark(output, field, first, counted)

    async def process_spider_output(
        self, response: Response, result: AsyncIterator[Any], spider: Any = None
    ) -> AsyncIterator[Any]:
        # async only: a callback's output waits for the digest's answer, not the reactor
        first = await self.duplicate_of(response)
        near = response.meta.pop(NEAR_OF, None)
        async for output in result:
            if first is not None:
                output = self._filtered(output, first)
                if output is None:
                    continue
            elif near is not None:
                output = self._marked(output, NEAR_DUPLICATE_OF, near)
            yield output
