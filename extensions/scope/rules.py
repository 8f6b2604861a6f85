"""Whether a URL is in a crawl's scope: the judgement every node makes before a
request is queued and again when it is leased.

A request of a scoped crawl carries its trail (``meta["_scope"]``): the seed
it descends from, its hops from that seed, how many of the last hops were
outside the scope (``extra_hops``), and the id of its seed's own scope
document, if it has one. A request without a trail is its own seed.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from extensions.frontier.domains import registered_domain
from extensions.scope.declared import SCOPE_TRAIL

if TYPE_CHECKING:
    from collections.abc import Iterable

    from extensions.scope.document import Scope

SEEDS_REMEMBERED = 4096

#: what a refusal is counted as (``scope/REASON``)
REASONS = ("excluded", "depth", "outside", "limit")


@dataclass(frozen=True)
class Trail:
    seed: str
    hops: int = 0
    #: hops outside the scope that led here (0: this URL is in it)
    out: int = 0
    #: the seed's own scope document ("" for none): ``NAME:scope`` field ``seed:ID``
    doc: str = ""

    @classmethod
    def of(cls, url: str, meta: dict[str, Any]) -> Trail:
        value = meta.get(SCOPE_TRAIL)
        if value is None:
            return cls(url)
        seed, hops, out, doc = value
        return cls(seed, hops, out, doc)

    def as_meta(self) -> list[Any]:
        return [self.seed, self.hops, self.out, self.doc]


@dataclass(frozen=True)
class Place:
    """A URL's parts the scope kinds compare, read once per URL."""

    url: str
    host: str
    netloc: str
    path: str

    @classmethod
    def of(cls, url: str) -> Place | None:
        try:
            parts = urlsplit(url)
            host = parts.hostname or ""
            port = parts.port
        except ValueError:
            return None
        netloc = f"{host}:{port}" if port and port not in (80, 443) else host
        return cls(url.split("#", 1)[0], host, netloc, parts.path or "/")


@functools.lru_cache(maxsize=SEEDS_REMEMBERED)
def _seed_place(url: str) -> Place | None:
    # a crawl's requests descend from few seeds: each is read once
    return Place.of(url)


def in_kind(kind: str | None, place: Place, seed: Place) -> bool:
    if kind == "any":
        return True
    if kind == "page":
        return place.url == seed.url
    if kind == "prefix":
        # under the seed's directory: /blog/a.html takes in /blog/ and below
        return place.netloc == seed.netloc and place.path.startswith(
            seed.path[: seed.path.rfind("/") + 1]
        )
    if kind == "host":
        return place.netloc == seed.netloc
    if kind == "domain":
        return registered_domain(place.host) == registered_domain(seed.host)
    return False


def within(scope: Scope, place: Place, seed: Place) -> bool:
    """Inside the scope's kind or one of its includes (no kind and no include:
    everything the spider's own rules let through)."""
    if scope.scope is None and not scope.include:
        return True
    return (scope.scope is not None and in_kind(scope.scope, place, seed)) or scope.included(
        place.url
    )


def reads_sitemap(request: Any) -> bool:
    """Whether a request reads a sitemap (or the robots.txt that names them) for
    the URLs it lists, as a spider's sitemap reading marks it."""
    return getattr(getattr(request, "callback", None), "__name__", "") == "_parse_sitemap"


def judge(
    scopes: Iterable[Scope], url: str, trail: Trail, sitemap: bool = False
) -> tuple[str | None, int]:
    """(why the URL is refused, or None; its hops outside the scope) for a URL
    at ``trail`` (its own hops, and the hops outside that led to its parent).
    A ``sitemap`` (a robots.txt or sitemap read for the URLs it lists) is a way
    to pages, not a page: the patterns and the depth are for what it lists, and
    a ``prefix`` scope takes its host's."""
    place = Place.of(url)
    seed = _seed_place(trail.seed)
    if place is None or seed is None:
        return "outside", trail.out
    out = 0
    for scope in scopes:
        if sitemap:
            kind = "host" if scope.scope == "prefix" else scope.scope
            scope = replace(scope, scope=kind, exclude=(), max_depth=None, _exclude=None)
        if scope.excluded(place.url):
            return "excluded", trail.out
        if scope.max_depth is not None and trail.hops > scope.max_depth:
            return "depth", trail.out
        if not within(scope, place, seed):
            out = trail.out + 1
            if out > scope.extra_hops:
                return "outside", out
    return None, out
