"""What a node already sent to the shared dupefilter: fingerprints, and the
URLs as its spider wrote them (``extensions/follow.py`` reads those)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from extensions.meta import CRAWL_ID, DELAY_UNTIL
from extensions.runtime import state_of

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler


class _Generations:
    """A set bounded by two generations of at most ``size``: what it forgets only
    costs the work it would have cost anyway."""

    def __init__(self, size: int):
        self.size = size
        self._current: set[object] = set()
        self._previous: set[object] = set()

    def __contains__(self, key: object) -> bool:
        return key in self._current or key in self._previous

    def add(self, key: object) -> None:
        if self.size <= 0:
            return
        if len(self._current) >= self.size:
            self._previous, self._current = self._current, set()
        self._current.add(key)

    def clear(self) -> None:
        self._current, self._previous = set(), set()


class SentFingerprints:
    """Fingerprints this node already wrote to the shared dupefilter.

    Most links a crawl extracts were seen before, many by this very node; those
    are dropped here, before being serialized and sent to Redis to be dropped
    there. Two generations of at most ``size`` bound the memory; a fingerprint
    forgotten only costs the trip to Redis it would have cost anyway.

    The URLs of those requests are kept too, per crawl, as the spider wrote
    them: the link path skips a link it finds here before building a request for
    it (``extensions/follow.py``).
    """

    def __init__(self, size: int):
        self.size = size
        self._fingerprints = _Generations(size)
        self._urls = _Generations(size)
        #: the node says at open whether its fingerprints read a URL's fragment
        #: (Scrapy's default does not): if not, URLs are kept without one
        self.fragments_matter = True
        #: the node says at open whether its fingerprints read only a request's
        #: method, URL and body (Scrapy's and scrapy-redis's): then a GET whose URL
        #: is here needs no fingerprint to be known as sent
        self.urls_decide = False

    def add(self, fingerprint: bytes | str) -> bool:
        """Remember ``fingerprint``; False if it was sent before."""
        if fingerprint in self._fingerprints:
            return False
        self._fingerprints.add(fingerprint)
        return True

    def add_url(self, crawl: str, url: str) -> None:
        """A request for ``url`` of ``crawl`` reached the dupefilter from this node."""
        self._urls.add(self._url_key(crawl, url))

    def has_url(self, crawl: str, url: str) -> bool:
        return self._url_key(crawl, url) in self._urls

    def has_request(self, request: Request) -> bool:
        """Whether a request for ``request``'s URL, as written, of its crawl went
        from this node to the dupefilter, and ``request``'s fingerprint is surely
        that one's: a plain GET (no body, not ``dont_filter``, not parked, not
        ``verbatim_url``) under a fingerprint of method, URL and body alone."""
        if not self.urls_decide or request.method != "GET" or request.body:
            return False
        meta = request.meta
        if request.dont_filter or DELAY_UNTIL in meta or meta.get("verbatim_url"):
            return False
        crawl = meta.get(CRAWL_ID) or ""
        return isinstance(crawl, str) and self.has_url(crawl, request.url)

    def _url_key(self, crawl: str, url: str) -> object:
        if not self.fragments_matter:
            url = url.partition("#")[0]
        return (crawl, url) if crawl else url

    def clear(self) -> None:
        self._fingerprints.clear()
        self._urls.clear()


def sent_for(crawler: Crawler) -> SentFingerprints:
    """The crawler's memory of what it sent: the admission writes it, the link
    path reads it (``DUPEFILTER_LOCAL_CACHE`` entries a generation)."""
    size = crawler.settings.getint("DUPEFILTER_LOCAL_CACHE")
    return state_of(crawler, SentFingerprints, lambda: SentFingerprints(size))
