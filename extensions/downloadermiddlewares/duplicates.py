"""Which URL had a page's content first: asked of Redis for every 200 answer
before its callback runs (``CONTENT_DUPLICATES``, "mark" by default).

The digest (``spidermiddlewares/duplicates.py``: the body without what changes on
every load) is taken as the answer comes off the downloader; the answers that
came in one turn of the reactor are asked about together, in one pipeline (one
round trip for all of them, on the reactor as the frontier's own writes are),
with each page's query-parameter evidence (``URL_LEARN_PARAMETERS``), and with
``CONTENT_NEAR_DUPLICATES`` a second one for the near duplicates of the pages
that are new. What Redis said goes in ``request.meta`` for the spider
middleware, which drops a duplicate's links and drops or marks its items.

Here, not in the spider middleware, so that the callback's output need not
wait: the spider middleware's output path stays synchronous, and the many links
of a page cost what they cost without the check. Below the retry, ban and
decompression middlewares (530): it sees the final, decoded answer a callback
gets. With Redis away a page is taken as new and counted (``duplicates/unchecked``).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import redis
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import defer
from twisted.internet import reactor as _reactor

from extensions import connection
from extensions.frontier.domains import registered_domain
from extensions.frontier.params import ParameterLearning
from extensions.frontier.redisops import execute
from extensions.installed import require_addon, switched_off
from extensions.keys import SpiderKeys
from extensions.meta import CRAWL_ID
from extensions.signals import params_learned
from extensions.spidermiddlewares.duplicates import (
    FIRST_OF,
    NEAR_OF,
    URL_KEPT,
    ContentDigests,
    stable_digest,
    stable_text,
)
from extensions.spidermiddlewares.nearduplicates import NearIndex, fingerprint, words

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)
reactor: Any = _reactor  # Twisted types the installed reactor poorly


class _Page:
    __slots__ = ("answered", "crawl", "digest", "stable", "url")

    def __init__(self, url: str, stable: bytes, crawl: str):
        self.url = url
        self.stable = stable
        self.crawl = crawl
        self.digest = stable_digest(stable, crawl)
        self.answered: defer.Deferred[tuple[str | None, str | None]] = defer.Deferred()


class ContentDuplicatesLookup:
    """The downloader middleware that asks, in batches (see the module's docstring)."""

    def __init__(self, crawler: Crawler):
        self.crawler = crawler
        self.stats = crawler.stats
        self.health = connection.health_for(crawler)
        self.server = connection.client_for(crawler)
        keys = SpiderKeys.for_crawler(crawler)
        settings = crawler.settings
        self.digests = ContentDigests(self.server, keys)
        near_mode = settings.get("CONTENT_NEAR_DUPLICATES")
        self.near = (
            None if near_mode == "off"
            else NearIndex(self.server, keys.near_prefix, settings.getint("CONTENT_NEAR_DISTANCE"))
        )  # fmt: skip
        self.near_min_words = settings.getint("CONTENT_NEAR_MIN_WORDS")
        self.word_hashes: dict[bytes, bytes] = {}
        self.learning = (
            ParameterLearning(self.server, keys, settings.getint("URL_LEARN_PAIRS"))
            if settings.getbool("URL_LEARN_PARAMETERS")
            and settings.getbool("URL_NORMALIZE_ENABLED")
            else None
        )
        self.waiting: list[_Page] = []
        self._asking: Any = None  # the reactor's call that asks about what waits

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ContentDuplicatesLookup:
        require_addon(crawler.settings, cls.__name__)
        if crawler.settings.get("CONTENT_DUPLICATES") == "off":
            raise switched_off(cls, "CONTENT_DUPLICATES is off")
        return cls(crawler)

    async def process_response(
        self, request: Request, response: Response, spider: Any = None
    ) -> Response:
        if self.wants(request, response):
            crawl = request.meta.get(CRAWL_ID) or ""
            self.note(request, *await maybe_deferred_to_future(self.ask(response, crawl)))
        return response

    @staticmethod
    def wants(request: Request, response: Response) -> bool:
        # an error page, an empty one, robots.txt: no page's content
        return (
            response.status == 200
            and bool(response.body)
            and not request.meta.get("dont_obey_robotstxt")
        )

    @staticmethod
    def note(request: Request, first: str | None, near: str | None) -> None:
        """What the spider middleware reads of the answer."""
        if first is not None:
            request.meta[FIRST_OF] = first
        if near is not None:
            request.meta[NEAR_OF] = near

    def ask(
        self, response: Response, crawl: str = ""
    ) -> defer.Deferred[tuple[str | None, str | None]]:
        """(the URL that had this content first in crawl ``crawl``, or None for a
        new page; the URL of the first page of its domain it nearly repeats, or
        None), once Redis has answered for every page of this turn."""
        page = _Page(response.url, stable_text(response.body), crawl)
        self.waiting.append(page)
        if self._asking is None:
            self._asking = reactor.callLater(0, self.ask_now)
        return page.answered

    def ask_now(self) -> None:
        """Ask about every page waiting, and answer each, in the order they came."""
        if self._asking is not None and self._asking.active():
            self._asking.cancel()  # asked now, not at the reactor's next turn
        self._asking = None
        pages, self.waiting = self.waiting, []
        if not pages:
            return
        started = time.monotonic()
        try:
            firsts, learned = self._firsts(pages)
            nears = self._nears(pages, firsts) if self.near is not None else {}
        except redis.RedisError as exc:
            self.health.failed(exc, started)
            self._unchecked(pages)
            return
        except Exception:  # a fault here must hold no page of the turn: taken as new
            logger.exception("content duplicates not checked for %d pages", len(pages))
            self._unchecked(pages)
            return
        self.health.ok()
        self.stats.inc_value("duplicates/checked", len(pages))
        for index, page in enumerate(pages):
            if learned.get(index):
                self._learned(page.url, learned[index])
            first: str | None = firsts[index]
            if first == page.url[:URL_KEPT]:
                first = None
            else:
                self.stats.inc_value("duplicates/pages")
                logger.debug("%s has the content of %s", page.url[:200], firsts[index][:200])
            near = nears.get(index)
            if near is not None:
                self.stats.inc_value("duplicates/near_pages")
                logger.debug("%s nearly repeats %s", page.url[:200], near[:200])
            self._answer(page, first, near)

    def _unchecked(self, pages: list[_Page]) -> None:
        self.stats.inc_value("duplicates/unchecked", len(pages))
        for page in pages:
            self._answer(page, None, None)

    @staticmethod
    def _answer(page: _Page, first: str | None, near: str | None) -> None:
        if not page.answered.called:  # (a request cancelled while it waited: no one asks)
            page.answered.callback((first, near))

    def _firsts(self, pages: list[_Page]) -> tuple[list[str], dict[int, dict[str, Any]]]:
        """One round trip: each page's first URL, and what its URL taught of its
        host's query parameters."""
        pipe = self.server.pipeline(transaction=False)
        for page in pages:
            self.digests.ask(pipe, page.digest, page.url)
        learning: list[int] = []
        if self.learning is not None:
            learning = [i for i, page in enumerate(pages)
                        if self.learning.queue(page.url, page.digest, pipe)]  # fmt: skip
        answers = execute(pipe)
        firsts = [self.digests.first_of(answer, page.url)
                  for answer, page in zip(answers, pages, strict=False)]  # fmt: skip
        learned = {}
        if self.learning is not None:
            for index, answer in zip(learning, answers[len(pages) :], strict=True):
                learned[index] = self.learning.read(answer)
        return firsts, learned

    def _nears(self, pages: list[_Page], firsts: list[str]) -> dict[int, str]:
        """One round trip for the new pages of enough words: the first page of their
        registered domain each nearly repeats (by index)."""
        assert self.near is not None
        asked: list[int] = []
        pipe = self.server.pipeline(transaction=False)
        for index, page in enumerate(pages):
            if firsts[index] != page.url[:URL_KEPT]:
                continue  # a duplicate: its near duplicates are its first page's
            page_words = words(page.stable)
            if len(page_words) < self.near_min_words:
                self.stats.inc_value("duplicates/near_too_few_words")
                continue
            try:
                host = urlsplit(page.url).hostname or ""
            except ValueError:  # a URL no page could have come from: no domain
                continue
            domain = registered_domain(host)
            domain = f"{page.crawl}:{domain}" if page.crawl else domain
            self.near.ask(pipe, domain, fingerprint(page_words, self.word_hashes), page.url)
            asked.append(index)
        if not asked:
            return {}
        nears = {}
        for index, answer in zip(asked, execute(pipe), strict=True):
            near = self.near.near_of(answer)
            if near is not None and near != pages[index].url[:URL_KEPT]:
                nears[index] = near
        return nears

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
