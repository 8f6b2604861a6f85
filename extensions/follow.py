"""The link path: the links of a page its node has not sent yet, by the rules of
a Scrapy ``LinkExtractor``, at a cost per *new* link rather than per link.

On a real site nearly every link of a page was met before. Scrapy resolves,
escapes and filters each one (``extract_links``), builds a ``Request`` for it
(``response.follow``), runs it through the spider middlewares, fingerprints it,
and only then does the dupefilter drop it: about half of a node's CPU on real
HTML. Here:

- a page's ``<a>`` and ``<area>`` are found by lxml's own iteration;
- an ``href`` is resolved and escaped once per page directory, and the
  extractor's URL rules are decided once per URL (``FOLLOW_RESOLVED_CACHE``
  entries, two generations);
- a URL this node already sent to the frontier for the page's crawl
  (``frontier/sent.py``) is skipped before anything is built for it;
- the rest become Scrapy ``Link`` objects (text, nofollow) as the extractor
  would make them.

What comes out equals ``extractor.extract_links(response)`` less the links the
node sent (``tests/test_follow.py`` checks it on python3-doc's pages). An
extractor with other tags or attributes, a ``process_value`` or ``strip=False``,
or a page that is not HTML, goes through its own ``extract_links``, filtered by
what was sent all the same. With host ranks on, links to other hosts are never
skipped: the link graph counts them (``spidermiddlewares/linkgraph.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlparse, urlsplit

from lxml import etree
from scrapy.link import Link
from scrapy.linkextractors import LinkExtractor
from scrapy.utils.misc import rel_has_nofollow
from scrapy.utils.python import unique as unique_list
from scrapy.utils.response import get_base_url
from scrapy.utils.url import url_is_from_any_domain
from w3lib.html import strip_html5_whitespace
from w3lib.url import canonicalize_url, safe_url_string

from extensions.frontier.sent import sent_for
from extensions.meta import CRAWL_ID
from extensions.spidermiddlewares.linkgraph import ranks_used

if TYPE_CHECKING:
    from scrapy.http import TextResponse

    from extensions.frontier.sent import SentFingerprints

#: as ``scrapy.linkextractors.lxmlhtml._collect_string_content``: a link's text
_text_of = etree.XPath("string()")
_SCHEMES = {"http", "https", "file", "ftp"}  # the extractor's _is_valid_url
_REFUSED = ""  # a cached verdict: the extractor's URL rules refuse this link
# a reference starting so resolves against the whole base, not its directory
_WHOLE_BASE = frozenset(["", "?", "#", ";", " ", "\t", "\n", "\r", "\x0c"])
FOLLOWERS_PER_SPIDER = 32  # extractors a spider keeps a follower for (more: built anew)


def fast_path_for(extractor: LinkExtractor) -> bool:
    """Whether ``extractor`` reads ``<a href>`` and ``<area href>`` as built by
    default, the only shape the fast path reproduces."""
    inner = getattr(extractor, "link_extractor", None)
    tag, attr = getattr(inner, "scan_tag", None), getattr(inner, "scan_attr", None)
    return (
        getattr(tag, "args", None) == ({"a", "area"}, set())
        and getattr(attr, "args", None) == ({"href"}, set())
        and getattr(getattr(inner, "process_attr", None), "__name__", "") == "_identity"
        and getattr(inner, "strip", False) is True
    )


class LinkFollower:
    """One extractor's link path for a node: ``new_links(response)``."""

    def __init__(
        self,
        extractor: LinkExtractor,
        sent: SentFingerprints | None,
        *,
        resolved_cache: int,
        other_hosts_known: bool = True,
        stats: Any = None,
    ):
        self.extractor = extractor
        self.sent = sent
        self.stats = stats
        self.fast = fast_path_for(extractor)
        #: False with host ranks on: links leaving the page's host are always yielded
        self.other_hosts_known = other_hosts_known
        self._size = resolved_cache
        self._resolved: dict[tuple[str, str], str] = {}
        self._resolved_before: dict[tuple[str, str], str] = {}

    def new_links(self, response: TextResponse, crawl: str | None = None) -> list[Link]:
        """The links ``extractor.extract_links(response)`` gives, in its order,
        less those this node already sent for ``crawl`` (the page's by default)."""
        if crawl is None:
            request = response.request  # (a response made without one has no meta)
            crawl = (request.meta.get(CRAWL_ID) if request is not None else "") or ""
        selector = getattr(response, "selector", None)
        if not self.fast or selector is None or selector.type != "html":
            return self._unsent(self.extractor.extract_links(response), response, crawl)
        extractor = self.extractor
        base = get_base_url(response)
        encoding = response.encoding
        directory, whole = _prefixes(base, encoding)
        page_origin = _origin(response.url)
        if extractor.restrict_xpaths:
            roots = [sub.root for xpath in extractor.restrict_xpaths
                     for sub in response.xpath(xpath)]  # fmt: skip
            if any(not isinstance(root, etree._Element) for root in roots):
                return self._unsent(extractor.extract_links(response), response, crawl)
        else:
            roots = [selector.root]
        sent, restrict_text = self.sent, extractor.restrict_text
        skip_other_hosts = self.other_hosts_known
        # links to a part of a page (#...) are the page when fingerprints leave
        # fragments out: one whose page was sent needs no resolving of its own
        by_stem = sent is not None and not sent.fragments_matter
        resolved = self._resolved_url
        emitted: set[str] = set()
        links: list[Link] = []
        known = 0
        for root in roots:
            # Scrapy keeps the first link of a URL in each region, then filters
            first_in_root: set[str] = set()
            for element in root.iter("a", "area"):
                href = element.get("href")
                if href is None:
                    continue
                # a reference that is a path resolves against the page's directory
                prefix = whole if href[:1] in _WHOLE_BASE else directory
                if by_stem and (cut := href.find("#")) >= 0:
                    stem = resolved(prefix, href[:cut], base, response.url, encoding)
                    if (
                        stem
                        and sent.has_url(crawl, stem)  # type: ignore[union-attr]
                        and (skip_other_hosts or stem.startswith(page_origin))
                    ):
                        known += 1
                        continue
                url = resolved(prefix, href, base, response.url, encoding)
                if not url or url in first_in_root:
                    continue
                first_in_root.add(url)
                if url in emitted:
                    continue
                if (
                    sent is not None
                    and sent.has_url(crawl, url)
                    and (skip_other_hosts or url.startswith(page_origin))
                ):
                    known += 1
                    emitted.add(url)
                    continue
                text = _text_of(element) or ""
                if restrict_text and not any(r.search(text) for r in restrict_text):
                    continue
                emitted.add(url)
                links.append(Link(url, text, nofollow=rel_has_nofollow(element.get("rel"))))
        if extractor.canonicalize:
            for link in links:
                link.url = canonicalize_url(link.url)
            links = unique_list(links, key=lambda link: link.url)
        self._count(known, len(links))
        return links

    def _unsent(self, links: list[Link], response: TextResponse, crawl: str) -> list[Link]:
        if self.sent is not None:
            origin, sent, before = _origin(response.url), self.sent, len(links)
            others = self.other_hosts_known
            links = [link for link in links if not sent.has_url(crawl, link.url)
                     or not (others or link.url.startswith(origin))]  # fmt: skip
            self._count(before - len(links), len(links))
        return links

    def _count(self, known: int, new: int) -> None:
        if self.stats is not None:
            if known:
                self.stats.inc_value("links/known", known)
            if new:
                self.stats.inc_value("links/new", new)

    def _resolved_url(self, prefix: str, href: str, base: str, page_url: str, encoding: str) -> str:
        """``_resolve``, kept: an ``href`` resolves the same under one prefix."""
        key = (prefix, href)
        url = self._resolved.get(key)
        if url is None:
            url = self._resolved_before.get(key)
            if url is None:
                url = self._resolve(href, base, page_url, encoding)
            self._remember(key, url)
        return url

    def _resolve(self, href: str, base: str, page_url: str, encoding: str) -> str:
        """The URL ``href`` is, exactly as Scrapy's extractor makes it, or _REFUSED
        if it is bogus or its URL rules refuse it."""
        try:
            url = safe_url_string(urljoin(base, strip_html5_whitespace(href)), encoding=encoding)
        except ValueError:
            return _REFUSED
        url = urljoin(page_url, url)
        return url if self._url_allowed(url) else _REFUSED

    def _url_allowed(self, url: str) -> bool:
        """The extractor's rules that look at the URL alone (its ``_link_allowed``
        but for ``restrict_text``, which is checked per link)."""
        extractor = self.extractor
        if url.split("://", 1)[0] not in _SCHEMES:
            return False
        if extractor.allow_res and not any(r.search(url) for r in extractor.allow_res):
            return False
        if extractor.deny_res and any(r.search(url) for r in extractor.deny_res):
            return False
        parsed = urlparse(url)
        if extractor.allow_domains and not url_is_from_any_domain(parsed, extractor.allow_domains):
            return False
        if extractor.deny_domains and url_is_from_any_domain(parsed, extractor.deny_domains):
            return False
        extensions = extractor.deny_extensions
        return not (extensions and _has_extension(parsed.path, extensions))

    def _remember(self, key: tuple[str, str], url: str) -> None:
        if len(self._resolved) >= self._size:
            self._resolved_before, self._resolved = self._resolved, {}
        self._resolved[key] = url


def _has_extension(path: str, extensions: set[str]) -> bool:
    """``url_has_any_extension``: each extension starts with "." and holds no
    "/", so a path ends with one only from one of its dots on: a set lookup per
    dot instead of an ``endswith`` per extension."""
    path = path.lower()
    dot = path.find(".")
    while dot >= 0:
        if path[dot:] in extensions:
            return True
        dot = path.find(".", dot + 1)
    return False


def _prefixes(base: str, encoding: str) -> tuple[str, str]:
    """What a reference's resolution depends on: for a path, the base up to its
    path's last "/"; for an empty, query or fragment reference, the whole base.
    The page's encoding goes with both (it escapes the query)."""
    parts = urlsplit(base)
    path = parts.path
    directory = f"{parts.scheme}://{parts.netloc}{path[: path.rfind('/') + 1]}"
    return f"{encoding} {directory}", f"{encoding} {base}"


def _origin(url: str) -> str:
    """``scheme://netloc/``: a URL of the same host starts with it."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}/"


def follower_for(spider: Any, extractor: LinkExtractor) -> LinkFollower:
    """The spider's follower of ``extractor``, built on first use."""
    followers: dict[int, LinkFollower] = spider.__dict__.setdefault("_link_followers", {})
    follower = followers.get(id(extractor))
    if follower is None or follower.extractor is not extractor:
        if len(followers) >= FOLLOWERS_PER_SPIDER:
            followers.clear()  # a spider that builds an extractor per page
        crawler = getattr(spider, "crawler", None)
        if crawler is None:  # not run by a crawler: nothing was sent
            follower = LinkFollower(extractor, None, resolved_cache=0)
        else:
            follower = LinkFollower(
                extractor,
                sent_for(crawler),
                resolved_cache=crawler.settings.getint("FOLLOW_RESOLVED_CACHE"),
                other_hosts_known=not ranks_used(crawler.settings),
                stats=crawler.stats,
            )
        followers[id(extractor)] = follower
    return follower
