"""What a page says about itself: ``<meta name="robots">``, ``X-Robots-Tag`` and
``rel="nofollow"``, honoured as the major crawlers do.

A page's directives are the union of its robots meta tags (``name="robots"``
and ``name=`` the crawler's own token), and of its ``X-Robots-Tag`` headers
(each directive for every crawler, or after ``TOKEN:`` for that crawler only).
Names and directives are read case-insensitively, with any spacing, over
several tags and headers; the most restrictive wins. ``nofollow`` (or
``none``): no request the page's callback yields is queued. ``noindex`` (or
``none``): its items are dropped (``ROBOTS_META_NOINDEX = "drop"``) or kept
with ``_noindex`` set (``"flag"``). With ``ROBOTS_FOLLOW_NOFOLLOW_LINKS =
False``, a request for a link the page marks ``rel="nofollow"`` is not queued
either (by default it is: the page does not vouch for the link, which is a
hint, as the major search engines read it, not a rule of crawling; Python's
documentation marks its "Show Source" links so). ``ROBOTS_META_OBEY = False``
turns all of it off.

The crawler's token is ``ROBOTSTXT_USER_AGENT``'s first word (else
``USER_AGENT``'s), as for robots.txt: ``MyBot/1.0 (+https://...)`` is
``mybot``.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from scrapy import Request
from scrapy.http import HtmlResponse
from w3lib.url import safe_url_string

from extensions.installed import require_addon, switched_off
from extensions.settingchecks import choice, flag
from extensions.spidermiddlewares.marking import ItemMarker
from extensions.usage import crawler_token

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)

SETTING_CHECKS = {
    "ROBOTS_META_OBEY": flag,
    "ROBOTS_META_NOINDEX": choice("drop", "flag"),
    "ROBOTS_FOLLOW_NOFOLLOW_LINKS": flag,
}

NOINDEX = "_noindex"  # the field a flagged item carries
# directives that take a value after a colon: not a crawler's name before it
VALUED = {"unavailable_after", "max-snippet", "max-image-preview", "max-video-preview"}
NOFOLLOW_LINKS_KEPT = 10_000  # rel="nofollow" links read from one page, at most
NOFOLLOW = re.compile(rb"(?i)nofollow")


def directives_of(value: str) -> set[str]:
    """The directives of one meta content: ``noindex, NoFollow`` -> {noindex, nofollow}."""
    return {part.strip().lower() for part in value.split(",") if part.strip()}


def header_directives(values: Iterable[bytes], token: str) -> set[str]:
    """The directives ``X-Robots-Tag`` headers give every crawler and the one
    named ``token``: ``noindex``, ``otherbot: nofollow``, ``mybot: noindex, nofollow``."""
    found: set[str] = set()
    for raw in values:
        agent = "*"  # until a value names one: a name then holds to the next
        for part in raw.decode("latin-1").split(","):
            part = part.strip()
            name, colon, rest = part.partition(":")
            if colon and name.strip().lower() not in VALUED:
                agent, part = name.strip().lower(), rest.strip()
            if part and agent in ("*", token):
                found.add(part.split(":")[0].strip().lower())
    return found


def meta_directives(response: Response, token: str) -> set[str]:
    found: set[str] = set()
    # most pages have no robots meta: a scan of the bytes spares them the parse
    if not isinstance(response, HtmlResponse) or not _meta_named(token).search(response.body):
        return found
    for meta in response.xpath("//meta[@name][@content]"):
        name = (meta.attrib.get("name") or "").strip().lower()
        if name == "robots" or (token and name == token):
            found |= directives_of(meta.attrib.get("content") or "")
    return found


@functools.cache
def _meta_named(token: str) -> re.Pattern[bytes]:
    names = b"robots" + (b"|" + re.escape(token.encode()) if token else b"")
    return re.compile(rb"(?i)<meta\s[^>]*name\s*=\s*[\"']?\s*(?:" + names + rb")\b")


def nofollow_links(response: Response) -> set[str]:
    """The absolute URLs of the page's ``rel="nofollow"`` links."""
    if not isinstance(response, HtmlResponse) or not NOFOLLOW.search(response.body):
        return set()
    hrefs = response.xpath(
        "//a[@href][contains(concat(' ', normalize-space(translate(@rel, 'NOFLW', 'noflw')),"
        " ' '), ' nofollow ')]/@href"
    ).getall()[:NOFOLLOW_LINKS_KEPT]
    found = set()
    for href in hrefs:
        try:
            found.add(safe_url_string(response.urljoin(href.strip())))
        except ValueError:
            continue  # a link the page could not have been followed by either
    return found


class RobotsMetaMiddleware:
    def __init__(self, crawler: Crawler):
        settings = crawler.settings
        self.stats = crawler.stats
        self.token = crawler_token(settings)
        self.noindex_mode = settings.get("ROBOTS_META_NOINDEX")
        self.follow_nofollow = settings.getbool("ROBOTS_FOLLOW_NOFOLLOW_LINKS")
        self.marker = ItemMarker(self.stats, "robots/unmarkable", logger)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RobotsMetaMiddleware:
        require_addon(crawler.settings, cls.__name__)
        if not crawler.settings.getbool("ROBOTS_META_OBEY"):
            raise switched_off(cls, "ROBOTS_META_OBEY is False")
        return cls(crawler)

    def directives(self, response: Response) -> set[str]:
        """What ``response`` asks of this crawler."""
        found = header_directives(response.headers.getlist("X-Robots-Tag"), self.token)
        found |= meta_directives(response, self.token)
        if "none" in found:
            found |= {"noindex", "nofollow"}
        return found

    def _filter(self, response: Response) -> Any:
        """The function each output of ``response``'s callback goes through:
        None drops it."""
        found = self.directives(response)
        nofollow, noindex = "nofollow" in found, "noindex" in found
        if nofollow:
            self.stats.inc_value("robots/nofollow_pages")
        if noindex:
            self.stats.inc_value("robots/noindex_pages")
        unfollowed = set() if nofollow or self.follow_nofollow else nofollow_links(response)

        def passed(output: Any) -> Any:
            if isinstance(output, Request):
                if nofollow:
                    self.stats.inc_value("robots/links_dropped")
                    return None
                if unfollowed and output.url in unfollowed:
                    self.stats.inc_value("robots/nofollow_links_dropped")
                    return None
                return output
            if not noindex:
                return output
            if self.noindex_mode == "drop":
                self.stats.inc_value("robots/items_dropped")
                return None
            return self.marker.mark(output, NOINDEX, True, "robots/items_flagged")

        return passed

    def process_spider_output(
        self, response: Response, result: Iterable[Any], spider: Any = None
    ) -> Iterator[Any]:
        passed = self._filter(response)
        for output in result:
            output = passed(output)
            if output is not None:
                yield output

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any], spider: Any = None
    ) -> AsyncIterator[Any]:
        passed = self._filter(response)
        async for output in result:
            output = passed(output)
            if output is not None:
                yield output
