"""Which requests a browser fetches, decided once, when a request is queued.

In this order: the request's own ``meta["render"]`` (the spider's word, true or
false); RENDER_URLS and the spider's ``render_urls`` (regular expressions: always
rendered); and with RENDER_AUTO, for the URLs RENDER_AUTO_URLS names (every URL
when empty), what the cluster learned for the URL's pattern (``url_pattern``:
its host and directory). A pattern learned as needing a browser is rendered
straight away, but for a RENDER_AUTO_RECHECK share fetched plainly again to see
whether the site changed; any other page is fetched plainly first, and the
check after it (``autocheck``) sends it to the render lane if its content is
missing. The learned patterns are one hash in Redis (``NAME:render_auto``),
shared by every node; a node keeps what it looked up for RENDER_AUTO_REFRESH
seconds.
"""

from __future__ import annotations

import logging
import random
import re
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import redis

from extensions import clock, connection
from extensions.keys import SpiderKeys
from extensions.meta import RENDER, RENDER_CHECK
from extensions.runtime import state_of

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

PATTERN_DEPTH = 3  # directory levels a pattern keeps
SEGMENT_LENGTH = 64
CACHE_SIZE = 50_000  # patterns a node remembers (oldest looked up go first)


def url_pattern(url: str) -> str:
    """``host/dir/sub/``: the host and directory of ``url``, a level that holds a
    digit as ``*`` (``/item/17/`` and ``/item/18/`` are one pattern), at most
    PATTERN_DEPTH levels. Pages of one directory are built the same way."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    levels = parts.path.split("/")[1:-1][:PATTERN_DEPTH]
    levels = [
        "*" if any(c.isdigit() for c in level) else level[:SEGMENT_LENGTH] for level in levels
    ]
    return host + "/" + "".join(level + "/" for level in levels)


def compile_patterns(patterns: Any) -> list[re.Pattern[str]]:
    return [re.compile(pattern) for pattern in patterns or ()]


class LearnedRender:
    """The URL patterns the cluster learned need a browser (``NAME:render_auto``:
    pattern -> when it was learned, ms; VERSION counts the changes), with a
    node-local cache. What a node looked up stays cached for RENDER_AUTO_REFRESH
    seconds, but a pattern learned anywhere reaches every node within
    VERSION_EVERY: a node reads the change count that often, and when it moved,
    looks up again what it had found unknown (one read a second, not one per
    pattern)."""

    VERSION = "#changes"  # a field no pattern can be (a pattern holds '/')
    VERSION_EVERY = 1.0

    def __init__(
        self, server: redis.Redis, key: str, *, refresh: float, max_patterns: int, stats: Any
    ):
        self.server = server
        self.key = key
        self.refresh = refresh
        self.max_patterns = max_patterns
        self.stats = stats
        self._cache: OrderedDict[str, tuple[bool, float]] = OrderedDict()
        self._version: Any = None  # the change count last read
        self._version_read = -self.VERSION_EVERY

    def needs_render(self, pattern: str) -> bool:
        now = time.monotonic()
        try:
            self._follow_changes(now)
            cached = self._cache.get(pattern)
            if cached is not None and now - cached[1] < self.refresh:
                return cached[0]
            known = bool(self.server.hexists(self.key, pattern))
        except redis.RedisError as exc:
            logger.warning("could not read the learned render patterns: %s", exc)
            cached = self._cache.get(pattern)
            return cached[0] if cached else False
        self._remember(pattern, known, now)
        return known

    def _follow_changes(self, now: float) -> None:
        if now - self._version_read < self.VERSION_EVERY:
            return
        self._version_read = now
        version = self.server.hget(self.key, self.VERSION)
        if version != self._version:
            self._version = version
            for pattern in [p for p, (known, _) in self._cache.items() if not known]:
                del self._cache[pattern]

    def learn(self, pattern: str) -> None:
        """The pattern needs a browser, from now on on every node (past
        RENDER_AUTO_MAX_PATTERNS, on none: a node keeps no view of its own)."""
        try:
            if self.server.hlen(self.key) > self.max_patterns:  # the count field too
                self.stats.inc_value("render/auto/patterns_full")
                return
            pipe = self.server.pipeline(transaction=True)
            pipe.hset(self.key, pattern, clock.now_ms())
            pipe.hincrby(self.key, self.VERSION, 1)
            pipe.execute()
        except redis.RedisError as exc:
            logger.warning("could not record render pattern %s: %s", pattern, exc)
            return
        self._remember(pattern, True, time.monotonic())

    def forget(self, pattern: str) -> None:
        """The pattern's pages came back whole without a browser: the site changed
        (the other nodes see it within RENDER_AUTO_REFRESH)."""
        self._remember(pattern, False, time.monotonic())
        try:
            self.server.hdel(self.key, pattern)
        except redis.RedisError as exc:
            logger.warning("could not forget render pattern %s: %s", pattern, exc)

    def _remember(self, pattern: str, known: bool, now: float) -> None:
        self._cache[pattern] = (known, now)
        self._cache.move_to_end(pattern)
        while len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)


def learned_for(crawler: Crawler) -> LearnedRender:
    """The crawler's one LearnedRender: what its check learns, its scheduler
    knows at once."""
    settings = crawler.settings
    return state_of(
        crawler,
        LearnedRender,
        lambda: LearnedRender(
            connection.client_for(crawler),
            SpiderKeys.for_crawler(crawler).named("render_auto"),
            refresh=settings.getfloat("RENDER_AUTO_REFRESH"),
            max_patterns=settings.getint("RENDER_AUTO_MAX_PATTERNS"),
            stats=crawler.stats,
        ),
    )


class RenderPolicy:
    def __init__(
        self,
        render_urls: list[re.Pattern[str]],
        stats: Any,
        *,
        learned: LearnedRender | None = None,
        auto_urls: list[re.Pattern[str]] | None = None,
        recheck: float = 0.0,
    ):
        self.render_urls = render_urls
        self.stats = stats
        self.learned = learned
        self.auto_urls = auto_urls or []
        self.recheck = recheck

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RenderPolicy | None:
        """The policy, or None when nothing is ever rendered by URL (requests
        may still ask with ``meta["render"]``)."""
        settings = crawler.settings
        spider_urls = getattr(crawler.spider, "render_urls", None) or []
        try:
            render_urls = compile_patterns([*settings.getlist("RENDER_URLS"), *spider_urls])
        except re.error as exc:
            raise ValueError(f"{crawler.spider}.render_urls: {exc}") from None
        if not settings.getbool("RENDER_AUTO"):
            return cls(render_urls, crawler.stats) if render_urls else None
        return cls(
            render_urls,
            crawler.stats,
            learned=learned_for(crawler),
            auto_urls=compile_patterns(settings.getlist("RENDER_AUTO_URLS")),
            recheck=settings.getfloat("RENDER_AUTO_RECHECK"),
        )

    def decide(self, request: Request) -> None:
        """Mark the request for a browser (``meta["render"]``), or, with
        RENDER_AUTO, for a plain fetch that checks (``meta["render_check"]``)."""
        meta = request.meta
        if RENDER in meta or RENDER_CHECK in meta:
            return  # the spider's word, or decided already (a retry, a check sent on)
        url = request.url
        if any(pattern.search(url) for pattern in self.render_urls):
            meta[RENDER] = True
            self.stats.inc_value("render/decided/urls")
            return
        if self.learned is None:
            return
        if self.auto_urls and not any(pattern.search(url) for pattern in self.auto_urls):
            return
        if not self.learned.needs_render(url_pattern(url)):
            meta[RENDER_CHECK] = "probe"
            self.stats.inc_value("render/auto/decided/plain")
        elif random.random() < self.recheck:
            meta[RENDER_CHECK] = "recheck"
            self.stats.inc_value("render/auto/decided/recheck")
        else:
            meta[RENDER] = True
            self.stats.inc_value("render/auto/decided/render")
