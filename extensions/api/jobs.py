"""An API call as a crawl of the cluster: a crawl id of its own (``api-`` and
24 hex digits), what the call asked kept beside it, its seed pushed to the API
spider's start list, where any node takes it under the cluster's robots.txt,
host rates and budgets. Its pages come back through ``NAME:api:results:ID``.

A scrape is a crawl of one page: its node follows no link of it (``capture.py``
drops them) and, once its page is read, the crawl is forgotten (registry,
counters, results), so that a million scrapes leave nothing behind. A crawl has
a scope (``extensions/scope/``) made of the call's paths, depth and limit."""

from __future__ import annotations

import json
import re
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from extensions import sharding
from extensions.api.declared import PREFIX
from extensions.frontier.crawls.state import Crawls
from extensions.frontier.seeding import push, validate, with_field
from extensions.frontier.start_urls import EntryRules
from extensions.scope.document import Scope, ScopeError, parse
from extensions.scope.seeding import store_crawl_scope, with_sitemaps
from extensions.scope.store import VERSION, ScopeStore, count_field, since_field

if TYPE_CHECKING:
    import redis
    from scrapy.settings import BaseSettings

    from extensions.keys import SpiderKeys

#: dead letters a failed scrape looks through for its reason (newest first)
DLQ_LOOK = 500
#: job records one sweep of ended calls reads at most
SWEEP_READ = 10_000
#: the counters a crawl's scope keeps (scope/state.py, sweep.py)
SCOPE_COUNTS = ("pages", "bytes", "limit", "outside", "excluded", "depth")
#: requests an API crawl may spend on robots.txt sitemaps and sitemap indexes,
#: beyond its limit of pages
SITEMAP_REQUESTS = 50


class BadCall(ValueError):
    """A call the API refuses (400), with the reason."""


@dataclass(frozen=True)
class Job:
    id: str
    kind: str
    url: str
    options: dict[str, Any]
    limit: int
    created: float
    cancelled: bool = False


def path_filters(include: list[str], exclude: list[str], seed: str) -> dict[str, list[str]]:
    """Firecrawl's includePaths and excludePaths (regular expressions on a URL's
    path) as the scope's include and exclude (on the whole URL): includePaths
    takes only what they match, so it becomes one exclude of everything else
    (the seed itself always in, as Firecrawl fetches it whatever its paths)."""
    host = r"^[a-zA-Z][a-zA-Z0-9+.-]*://[^/?#]+"

    def on_path(pattern: str) -> str:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise BadCall(f"{pattern!r:.100} is not a regular expression: {exc}") from None
        return host + pattern[1:] if pattern.startswith("^") else host + "[^?#]*?" + pattern

    scope: dict[str, list[str]] = {"exclude": [on_path(p) for p in exclude]}
    if include:
        wanted = "|".join(f"(?:{on_path(p)})" for p in include)
        start = re.escape(seed.rstrip("/")) + "/?$"  # (as the seed is written, or normalized)
        scope["exclude"].append(f"^(?!(?:{wanted})|{start})")
    return scope


class Jobs:
    def __init__(self, server: redis.Redis, keys: SpiderKeys, settings: BaseSettings):
        self.server = server
        self.keys = sharding.as_recorded(server, keys)
        self.crawls = Crawls(server, self.keys)
        self.rules = EntryRules.from_settings(settings)
        self.jobs_key = keys.named("api_jobs")
        self.ttl = settings.getint("API_RESULTS_TTL")

    def checked_url(self, url: Any) -> str:
        if not isinstance(url, str) or not url.strip():
            raise BadCall("url: a URL is required")
        valid, refused = validate([url.strip()], self.rules)
        if refused:
            raise BadCall(f"url: {refused[0][1]}")
        if not url.strip().lower().startswith(("http://", "https://")):
            raise BadCall("url: must be an http(s) URL")
        return valid[0]

    def start(self, kind: str, url: Any, options: dict[str, Any], *, limit: int = 1,
              scope: dict[str, Any] | None = None, also: tuple[str, ...] = ()) -> Job:  # fmt: skip
        """Queue the call's crawl (``also``: paths of the seed's origin to fetch
        too, a map's ``/llms.txt``); BadCall says what is wrong (nothing queued)."""
        seed = self.checked_url(url)
        parsed: Scope | None = None
        if scope is not None:
            try:
                parsed = parse(scope)
            except ScopeError as exc:
                raise BadCall(str(exc)) from None
        job = Job(PREFIX + uuid.uuid4().hex[:24], kind, seed, options, limit, time.time())
        record = {"kind": kind, "url": seed, "options": options, "limit": limit,
                  "created": job.created}  # fmt: skip
        self.server.hset(self.jobs_key, job.id, json.dumps(record))
        # the limit bounds the crawl's budget (requests it may be given, counted in
        # the script that queues them, however many nodes crawl), with room for the
        # sitemaps read; the documents past the limit are never answered
        budget = None
        if kind in ("crawl", "map"):
            reads_sitemaps = parsed is not None and parsed.sitemaps in ("include", "only")
            budget = limit + (SITEMAP_REQUESTS if reads_sitemaps else 0)
        self.crawls.register(job.id, budget=budget)
        origin = "/".join(seed.split("/", 3)[:3])
        entries = [with_field(u, "crawl", job.id) for u in [seed, *(origin + p for p in also)]]
        if parsed is not None:
            store_crawl_scope(self.server, self.keys, job.id, parsed)
            if parsed.sitemaps in ("include", "only"):
                entries = with_sitemaps(entries, parsed, job.id)
        push(self.server, self.keys, entries)
        return job

    def job(self, crawl: str) -> Job | None:
        if not crawl.startswith(PREFIX):
            return None
        raw = self.server.hget(self.jobs_key, crawl)
        try:
            data = json.loads(raw) if raw else None
        except ValueError:
            return None
        if not isinstance(data, dict):
            return None
        return Job(crawl, str(data.get("kind")), str(data.get("url")), data.get("options") or {},
                   int(data.get("limit") or 0), float(data.get("created") or 0),
                   data.get("cancelled") is True)  # fmt: skip

    def cancel(self, crawl: str) -> None:
        """DELETE /v2/crawl/ID: the crawl stops, and says it was cancelled (a crawl
        its limit ended says it completed)."""
        raw = self.server.hget(self.jobs_key, crawl)
        record = json.loads(raw) if raw else {}
        self.server.hset(self.jobs_key, crawl, json.dumps({**record, "cancelled": True}))
        self.crawls.stop(crawl)

    def results(self, crawl: str, start: int, count: int) -> list[dict[str, Any]]:
        key = self.keys.named("api_results", crawl=crawl)
        raw: Any = self.server.lrange(key, start, start + count - 1)
        found = []
        for entry in raw:
            try:
                found.append(json.loads(entry))
            except ValueError:
                continue  # not a document a node wrote
        return found

    def result_count(self, crawl: str) -> int:
        return int(self.server.llen(self.keys.named("api_results", crawl=crawl)))

    def failure(self, job: Job) -> str:
        """Why a crawl that ended without a page has none: its dead letter's error."""
        raw: Any = self.server.lrange(self.keys.dlq, 0, DLQ_LOOK - 1)
        for entry in raw:
            try:
                letter = json.loads(entry)
            except ValueError:
                continue
            if isinstance(letter, dict) and letter.get("url") == job.url:
                return str(letter.get("error") or letter.get("kind") or "failed")
        return "the page could not be fetched"

    def forget(self, crawl: str, scoped: bool = True) -> None:
        """A scrape or map read, or a crawl ended API_RESULTS_TTL ago: nothing of
        it stays in Redis (its registry, counters, results, record and scope;
        ``scoped``: the nodes are told the scopes changed)."""
        store = ScopeStore(self.server, self.keys)
        pipe = self.server.pipeline(transaction=False)
        pipe.hdel(self.keys.crawls, crawl)
        results = self.keys.named("api_results", crawl=crawl)
        pipe.delete(self.keys.crawl(crawl), self.keys.crawl_groups(crawl),
                    self.keys.crawl_ready(crawl), results)  # fmt: skip
        pipe.hdel(self.jobs_key, crawl)
        pipe.hdel(store.key, crawl, since_field(crawl))
        pipe.hdel(store.counts_key, *(count_field(crawl, name) for name in SCOPE_COUNTS))
        if scoped:
            pipe.hincrby(store.key, VERSION, 1)
        pipe.execute()

    def sweep(self, now: float) -> int:
        """Forget the API's calls that ended API_RESULTS_TTL ago (a crawl whose
        results expired; a scrape or map its server never answered), so that the
        registry and the scopes hold the live ones only; how many. A crawl that
        ended unread gets its results' expiry here."""
        gone: list[str] = []
        for n, (field, _) in enumerate(self.server.hscan_iter(self.jobs_key, count=500)):
            if n >= SWEEP_READ:
                break
            job = self.job(field.decode() if isinstance(field, bytes) else str(field))
            if job is None or job.created + self.ttl > now:
                continue
            if job.kind != "crawl":
                gone.append(job.id)
                continue
            figures = self.crawls.figures(job.id)
            if figures.state in ("running", "paused") and (
                figures.pending or not (figures.done or figures.dlq)
            ):
                continue  # still crawling
            left = self.server.ttl(self.keys.named("api_results", crawl=job.id))
            if left == -1:
                self.expire(job.id)  # ended, never read to its end
            elif left == -2:
                gone.append(job.id)
        for crawl in gone:
            self.forget(crawl, scoped=False)
        if gone:
            self.server.hincrby(ScopeStore(self.server, self.keys).key, VERSION, 1)
        return len(gone)

    def expire(self, crawl: str) -> None:
        """A crawl ended: its results and its record go after API_RESULTS_TTL."""
        self.server.expire(self.keys.named("api_results", crawl=crawl), self.ttl)
