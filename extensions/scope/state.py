"""A node's view of the cluster's scopes, and its judgements.

The documents are read again when ``NAME:scope``'s version moves, looked at
SCOPE_REFRESH seconds apart at most (one HGET); what the node counted goes
out at the same look, and a crawl with limits has its cluster-wide pages and
bytes read back then. A crawl past a limit is refused everything from then on
and, under an id, stopped (its queued requests removed, as ``scrapy stop``).
"""

from __future__ import annotations

import collections
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import redis

from extensions import clock
from extensions.connection import text
from extensions.meta import CRAWL_ID
from extensions.scope.declared import SCOPE_TRAIL
from extensions.scope.document import EMPTY, Scope, ScopeError, parse
from extensions.scope.rules import Trail, judge, reads_sitemap
from extensions.scope.store import (
    SEED,
    VERSION,
    ScopeStore,
    count_field,
    seed_doc_id,
    since_field,
)

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.statscollectors import StatsCollector

    from extensions.connection import RedisHealth

logger = logging.getLogger(__name__)

#: what a start entry's meta names to give its seed a scope of its own
SEED_SCOPE = "scope"
#: crawl ids a node remembers having met at most (then it meets them afresh)
MET_KEPT = 10_000


class ScopeState:
    def __init__(
        self,
        store: ScopeStore,
        stats: StatsCollector,
        health: RedisHealth,
        *,
        refresh: float,
        stop_crawl: Callable[[str, str], Any] | None = None,
    ):
        self.store = store
        self.stats = stats
        self.health = health
        self.refresh = refresh
        #: ends a crawl under an id: (crawl, why) -> None
        self.stop_crawl = stop_crawl
        self.scopes: dict[str, Scope] = {}
        self.version: int | None = None
        self.looked = float("-inf")
        self.owed: collections.Counter[str] = collections.Counter()
        #: crawl -> the limit it reached (everything of it is refused)
        self.reached: dict[str, str] = {}
        #: (crawl, host) at its max_pages_per_host; pages owed per host
        self.full_hosts: set[tuple[str, str]] = set()
        self.owed_hosts: collections.Counter[tuple[str, str]] = collections.Counter()
        #: crawl -> its cluster-wide pages and bytes, and its start (s), at the last look
        self.totals: dict[str, tuple[int, int, float]] = {}
        self._seed_docs: set[str] = set()
        #: seeds' own scopes Redis did not take yet (it was away)
        self._unstored: dict[str, Scope] = {}
        #: crawl ids met since (bounded): each looked up once when first met
        self._met: set[str] = set()

    # --- the judgements -------------------------------------------------------------

    def scopes_of(self, crawl: str, doc: str) -> list[Scope]:
        found = []
        scope = self.scopes.get(crawl)
        if scope is not None:
            found.append(scope)
        if doc:
            seed_scope = self.scopes.get(SEED + doc)
            if seed_scope is not None:
                found.append(seed_scope)
        return found

    def child(self, parent: Request, child: Request) -> str | None:
        """Why a link the spider yielded is out of its crawl's scope (counted),
        or None, its trail set."""
        self.look()
        crawl = child.meta.get(CRAWL_ID) or parent.meta.get(CRAWL_ID) or ""
        self._meet(crawl)
        if crawl in self.reached or self._host_full(crawl, child.url):
            return self._refused(crawl, "limit")
        parent_trail = Trail.of(parent.url, parent.meta)
        scopes = self.scopes_of(crawl, parent_trail.doc)
        if not scopes:
            return None
        from_sitemap = reads_sitemap(parent)
        if _sitemaps_refused(scopes, child, from_sitemap):
            return self._refused(crawl, "outside")
        # a sitemap's entries are as far from the seed as the sitemap
        hops = parent_trail.hops + (0 if from_sitemap else 1)
        trail = Trail(parent_trail.seed, hops, parent_trail.out, parent_trail.doc)
        reason, out = judge(scopes, child.url, trail, sitemap=reads_sitemap(child))
        if reason is not None:
            return self._refused(crawl, reason)
        child.meta[SCOPE_TRAIL] = [trail.seed, trail.hops, out, trail.doc]
        return None

    def leased(self, request: Request) -> str | None:
        """Why a leased request is out of its crawl's scope now (counted), or None."""
        self.look()
        crawl = request.meta.get(CRAWL_ID) or ""
        self._meet(crawl)
        if crawl in self.reached or self._host_full(crawl, request.url):
            return self._refused(crawl, "limit")
        if not self.scopes:
            return None
        trail = Trail.of(request.url, request.meta)
        scopes = self.scopes_of(crawl, trail.doc)
        if not scopes:
            return None
        if _sitemaps_refused(scopes, request, from_sitemap=True):
            return self._refused(crawl, "outside")
        # judged from its parent: the hops outside that led there
        parent = Trail(trail.seed, trail.hops, max(trail.out - 1, 0), trail.doc)
        reason, _ = judge(scopes, request.url, parent, sitemap=reads_sitemap(request))
        return None if reason is None else self._refused(crawl, reason)

    def seed_problem(self, request: Request) -> str | None:
        """A start entry's own scope that cannot be taken (the request is
        dead-lettered with it); a good one is stored and becomes its trail.
        Asked of start entries' requests alone (``check_start_entries``): a
        spider's own requests may use ``meta["scope"]`` for anything."""
        document = request.meta.get(SEED_SCOPE)
        if document is None:
            return None
        try:
            scope = parse(document)
        except ScopeError as exc:
            return f"meta['scope']: {exc}"
        doc = self._seed_doc(scope)
        del request.meta[SEED_SCOPE]
        request.meta[SCOPE_TRAIL] = [request.url, 0, 0, doc]
        return None

    def mark(self, request: Request) -> None:
        """A request of a scoped crawl without a trail is a seed: its trail
        starts here (its links count their hops from it)."""
        if SCOPE_TRAIL in request.meta or not self.scopes:
            return
        if (request.meta.get(CRAWL_ID) or "") in self.scopes:
            request.meta[SCOPE_TRAIL] = [request.url, 0, 0, ""]

    def fetched(self, crawl: str, size: int, url: str) -> None:
        """A response of a crawl with limits: its page and bytes count."""
        pages, size_field = count_field(crawl, "pages"), count_field(crawl, "bytes")
        self.owed[pages] += 1
        self.owed[size_field] += size
        if self.scopes[crawl].max_pages_per_host is not None:
            self.owed_hosts[(crawl, _host(url))] += 1
        if crawl not in self.reached:
            # the cluster's totals at the last look, and this node's pages since:
            # the node stops at once, not at its next look
            known, known_size, since = self.totals.get(crawl, (0, 0, 0.0))
            self._check_limits(crawl, known + self.owed[pages], known_size + self.owed[size_field],
                               since)  # fmt: skip

    def _host_full(self, crawl: str, url: str) -> bool:
        return bool(self.full_hosts) and (crawl, _host(url)) in self.full_hosts

    @staticmethod
    def is_page(request: Request) -> bool:
        """A page of the crawl, not the robots.txt a page asked for."""
        return not (request.meta.get("dont_obey_robotstxt") and request.url.endswith("/robots.txt"))

    def has_limits(self, crawl: str) -> bool:
        scope = self.scopes.get(crawl)
        return scope is not None and bool(scope.limits)

    def _refused(self, crawl: str, reason: str) -> str:
        self.stats.inc_value(f"scope/{reason}")
        self.owed[count_field(crawl, reason)] += 1
        return reason

    def _seed_doc(self, scope: Scope) -> str:
        doc = seed_doc_id(scope)
        if doc not in self._seed_docs:
            self.scopes[SEED + doc] = scope
            try:
                self.store.add_seed_scope(scope)
            except redis.RedisError as exc:  # stored at the next look: judged here meanwhile
                self.health.failed(exc)
                self._unstored[doc] = scope
            self._seed_docs.add(doc)
        return doc

    # --- the cluster's view -------------------------------------------------------------

    def _meet(self, crawl: str) -> None:
        """A crawl id this node meets for the first time is looked up now, not at
        the next look: its scope may have been stored since the last one (a crawl
        seeded just after its scope, as scrapy seed and the API do), and its first
        pages' links would be judged without it."""
        if not crawl or crawl in self.scopes or crawl in self._met:
            return
        if len(self._met) >= MET_KEPT:
            self._met.clear()
        self._met.add(crawl)
        self.looked = float("-inf")
        self.look()

    def look(self, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        if now - self.looked < self.refresh:
            return
        self.looked = now
        try:
            self.sync()
        except redis.RedisError as exc:  # counts stay owed; the documents as they were
            self.health.failed(exc)

    def sync(self) -> None:
        for doc, scope in list(self._unstored.items()):
            self.store.add_seed_scope(scope)
            del self._unstored[doc]
        owed, self.owed = self.owed, collections.Counter()
        hosts, self.owed_hosts = self.owed_hosts, collections.Counter()
        pipe = self.store.server.pipeline(transaction=False)
        pipe.hget(self.store.key, VERSION)
        for field, count in owed.items():
            pipe.hincrby(self.store.counts_key, field, count)
        for (crawl, host), count in hosts.items():
            pipe.hincrby(self.store.hosts_key, count_field(crawl, host), count)
        try:
            answers = pipe.execute()
        except redis.RedisError:
            self.owed.update(owed)
            self.owed_hosts.update(hosts)
            raise
        # the cluster's pages of each host this node fetched from, as they are now
        for (crawl, host), total in zip(hosts, answers[1 + len(owed) :], strict=True):
            most = self.scopes.get(crawl, EMPTY).max_pages_per_host
            if most is not None and int(total) >= most:
                self.full_hosts.add((crawl, host))
        version = _number(answers[0])
        if version != self.version:
            self._read_documents(version)
        limited = [crawl for crawl, scope in self.scopes.items() if scope.limits]
        if not limited:
            return
        pipe = self.store.server.pipeline(transaction=False)
        for crawl in limited:
            pipe.hmget(self.store.counts_key, count_field(crawl, "pages"),
                       count_field(crawl, "bytes"))  # fmt: skip
            pipe.hget(self.store.key, since_field(crawl))
        totals = pipe.execute()
        for index, crawl in enumerate(limited):
            pages, size = (_number(v) for v in totals[2 * index])
            since = _number(totals[2 * index + 1]) / 1000
            self.totals[crawl] = (pages, size, since)
            self._check_limits(crawl, pages, size, since)

    def _read_documents(self, version: int) -> None:
        scopes, problems = self.store.read_all()
        for problem in problems:
            logger.error("a scope document cannot be read, and is not applied: %s", problem)
            self.stats.inc_value("scope/unreadable")
        seeds = {name: s for name, s in self.scopes.items() if name.startswith(SEED)}
        self.scopes = {**seeds, **scopes}
        self.version = version
        # a crawl whose limits were raised or removed goes on (its hosts are
        # counted afresh from their next page)
        self.reached = {c: why for c, why in self.reached.items() if self.has_limits(c)}
        self.full_hosts.clear()

    def _check_limits(self, crawl: str, pages: int, size: int, since: float) -> None:
        scope = self.scopes[crawl]
        why = None
        if scope.max_pages is not None and pages >= scope.max_pages:
            why = f"max_pages ({scope.max_pages}) reached"
        elif scope.max_bytes is not None and size >= scope.max_bytes:
            why = f"max_bytes ({scope.max_bytes}) reached"
        elif scope.max_seconds is not None and since and clock.now() - since >= scope.max_seconds:
            why = f"max_seconds ({scope.max_seconds:g}) passed"
        if why is None:
            self.reached.pop(crawl, None)
            return
        if crawl not in self.reached:
            self.reached[crawl] = why
            logger.info("crawl %r stopped by its scope: %s", crawl or "(no id)", why)
            if crawl and self.stop_crawl is not None:
                try:
                    self.stop_crawl(crawl, why)
                except redis.RedisError as exc:  # its requests are refused here all the same,
                    self.health.failed(exc)  # and the other nodes stop it at their look


def _host(url: str) -> str:
    try:
        return urlsplit(url).netloc.lower()
    except ValueError:
        return ""


def _sitemaps_refused(scopes: list[Scope], request: Request, from_sitemap: bool) -> bool:
    """``sitemaps``: "skip" refuses a sitemap; "only" refuses a page's links
    (``from_sitemap``: the request came from a sitemap, or its origin is not known)."""
    for scope in scopes:
        if scope.sitemaps == "skip" and reads_sitemap(request):
            return True
        if scope.sitemaps == "only" and not from_sitemap and not reads_sitemap(request):
            return True
    return False


def _number(raw: Any) -> int:
    try:
        return int(text(raw)) if raw is not None else 0
    except ValueError:
        return 0
