"""A page is stored once, whatever URL it came under: content duplicates.

The normalizer chain (``extensions/urlnorm``) makes one URL of the variants it
can tell from the URL alone; this middleware finds the rest from the page. Each
200 answer's content digest (``content_digest``: the body without its scripts,
styles and comments, with dates and times masked and white space collapsed, so
what changes on every load does not make a page new) is kept for the crawl in
Redis, with the URL that first had it. A page whose digest another URL had
first is a duplicate: with ``CONTENT_DUPLICATES = "drop"`` its callback's items
are dropped, with ``"mark"`` (the default) they carry ``duplicate_of``; its
links are never followed again. The same URL fetched again (a retry, a recrawl,
a node that died before its lease ended) is never its own duplicate, so a page
is not lost to a kill -9 between the digest and its items.

A script a page (HSETNX, then HGET) into ``NAME:digests:BUCKET`` (65,536
buckets, 8 bytes of digest and the URL a page), sent for all the pages of a
reactor turn in one round trip by the downloader middleware
(``downloadermiddlewares/duplicates.py``); with ``CONTENT_NEAR_DUPLICATES`` a
page new by its digest takes a second for its near duplicates (``nearduplicates.py``).
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from scrapy import Request

from extensions import connection
from extensions.frontier.redisops import run_script
from extensions.installed import require_addon, switched_off
from extensions.settingchecks import choice, flag, number
from extensions.spidermiddlewares.marking import ItemMarker
from extensions.spidermiddlewares.nearduplicates import DISTANCE_MAX

if TYPE_CHECKING:
    import redis
    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from extensions.keys import SpiderKeys

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
# request.meta, from the downloader middleware: the page a duplicate repeats, and
# the page a near duplicate nearly repeats, for its output
FIRST_OF = "_duplicate_of"
NEAR_OF = "_near_duplicate_of"
URL_KEPT = 2000  # characters of the first URL kept with a digest

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
# what bytes.split() splits at: deleted in one pass instead (a third of the time)
WHITE_SPACE = b"\t\n\x0b\x0c\r "


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
    return stable_text(body).translate(None, WHITE_SPACE)


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
    digest.update(stable.translate(None, WHITE_SPACE))
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
        return self.first_of(self.ask(None, digest, url), url)

    def ask(self, pipe: Any, digest: bytes, url: str) -> Any:
        """``first_url``'s script, run now (``pipe`` None) or queued on ``pipe``;
        ``first_of`` reads its answer."""
        key = f"{self.prefix}{digest[:2].hex()}"
        return run_script(self._first_url, [key], [digest[2:], url[:URL_KEPT]], pipe)

    @staticmethod
    def first_of(answer: Any, url: str) -> str:
        return connection.text(answer) if answer is not None else url


class ContentDuplicatesMiddleware:
    """A duplicate page's links are not followed, its items dropped or marked
    (``duplicate_of``); a near duplicate's items marked (``near_duplicate_of``)
    or, with ``CONTENT_NEAR_DUPLICATES = "drop"``, dropped with its links. What
    Redis said of the page comes from the downloader middleware
    (``downloadermiddlewares/duplicates.py``) in its request's meta."""

    def __init__(self, crawler: Crawler, mode: str):
        self.stats = crawler.stats
        self.mode = mode
        self.near_mode = crawler.settings.get("CONTENT_NEAR_DUPLICATES")
        self.marker = ItemMarker(self.stats, "duplicates/unmarkable", logger)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ContentDuplicatesMiddleware:
        require_addon(crawler.settings, cls.__name__)
        mode = crawler.settings.get("CONTENT_DUPLICATES")
        if mode == "off":
            raise switched_off(cls, "CONTENT_DUPLICATES is off")
        return cls(crawler, mode)

    def _verdict(self, response: Response) -> tuple[str | None, str | None]:
        """(the page it repeats, or None; the page it nearly repeats, or None)."""
        first = response.meta.pop(FIRST_OF, None)
        near = response.meta.pop(NEAR_OF, None)
        if near is not None and self.near_mode == "drop" and first is None:
            first = near  # dropped as a duplicate of it
            near = None
        return first, near

    def _each(self, output: Any, first: str | None, near: str | None) -> Any | None:
        if first is not None:
            return self._filtered(output, first)
        if near is not None:
            return self._marked(output, NEAR_DUPLICATE_OF, near)
        return output

    def _filtered(self, output: Any, first: str) -> Any | None:
        if isinstance(output, Request):
            self.stats.inc_value("duplicates/links_dropped")
            return None
        if self.mode == "drop":
            self.stats.inc_value("duplicates/items_dropped")
            return None
        return self._marked(output, DUPLICATE_OF, first)

    def _marked(self, output: Any, field: str, first: str) -> Any:
        if isinstance(output, Request):
            return output  # a near duplicate's links are followed
        near = field == NEAR_DUPLICATE_OF
        counted = "duplicates/near_items_marked" if near else "duplicates/items_marked"
        return self.marker.mark(output, field, first, counted)

    def process_spider_output(
        self, response: Response, result: Iterable[Any], spider: Any = None
    ) -> Iterator[Any]:
        first, near = self._verdict(response)
        if first is None and near is None:
            yield from result  # a new page, the common case: nothing to do per output
            return
        for output in result:
            output = self._each(output, first, near)
            if output is not None:
                yield output

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any], spider: Any = None
    ) -> AsyncIterator[Any]:
        first, near = self._verdict(response)
        async for output in result:
            if first is not None or near is not None:
                output = self._each(output, first, near)
                if output is None:
                    continue
            yield output
