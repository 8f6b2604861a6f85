"""What an API call does, whoever asks: the HTTP routes of ``scrapy api``
(``app.py``) and the tools of ``scrapy mcp`` (``mcpserver.py``) both call these.

Each takes a call's options in Firecrawl's v2 shapes and answers a dict of
Firecrawl's answer, or raises ``BadCall`` (400) or ``ApiError`` with the status
and error Firecrawl would give. Redis is read in worker threads: the event loop
never waits on it.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from extensions.api.documents import FORMATS, format_names
from extensions.api.jobs import BadCall, Job, Jobs, path_filters

if TYPE_CHECKING:
    from collections.abc import Callable

    from extensions.api.archived import ArchiveLookup
    from extensions.api.known import KnownUrls

logger = logging.getLogger(__name__)

#: documents one look at a crawl answers at most
PAGE = 100
#: seconds between looks at a scrape's results
POLL = 0.1
#: the options of a scrape (and a crawl's scrapeOptions) the cluster acts on
SCRAPE_OPTIONS = {"url", "formats", "onlyMainContent", "timeout", "maxAge"}
CRAWL_OPTIONS = {"url", "includePaths", "excludePaths", "maxDiscoveryDepth", "limit",
                 "allowSubdomains", "crawlEntireDomain", "allowExternalLinks", "sitemap",
                 "scrapeOptions"}  # fmt: skip
SITEMAP = ("include", "skip", "only")
MAP_OPTIONS = {"url", "limit", "sitemap", "includeSubdomains", "search"}
#: URLs a map answers unless its call says fewer (Firecrawl's default)
MAP_LIMIT = 5000
#: results a map reads at most (its sitemaps may list the same URL many times)
MAP_READ = 100_000
#: seconds between sweeps of the calls that ended long ago
SWEEP_EVERY = 60.0
#: Firecrawl's default maxAge (ms): a capture two days old or younger answers a scrape
MAX_AGE = 172_800_000


class ApiError(Exception):
    """A call the cluster cannot answer: Firecrawl's status and error."""

    def __init__(self, status: int, error: str, **more: Any):
        super().__init__(error)
        self.status = status
        self.error = error
        self.more = more


def _warning(body: dict[str, Any], known: set[str], formats: list[str]) -> str | None:
    ignored = sorted(set(body) - known)
    unmade = [f for f in formats if f not in FORMATS]
    said = []
    if ignored:
        said.append("not acted on by this cluster: " + ", ".join(ignored))
    if unmade:
        said.append("formats this cluster does not make: " + ", ".join(unmade))
    return "; ".join(said) or None


def _scrape_options(body: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    formats = body.get("formats", ["markdown"])
    if not isinstance(formats, list):
        raise BadCall("formats: must be a list")
    names = format_names(formats)
    if len(names) != len(formats):
        raise BadCall('formats: each is a name or {"type": name}')
    only_main = body.get("onlyMainContent", True)
    if not isinstance(only_main, bool):
        raise BadCall("onlyMainContent: must be true or false")
    made = [n for n in names if n in FORMATS] or ["markdown"]
    return {"formats": made, "onlyMainContent": only_main}, names


def integer(body: dict[str, Any], name: str, low: int, high: int | None = None) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if (
        not isinstance(value, int)
        or isinstance(value, bool)
        or value < low
        or (high is not None and value > high)
    ):
        bound = f" and at most {high}" if high is not None else ""
        raise BadCall(f"{name}: must be a whole number, {low} or more{bound}")
    return value


def _flag(body: dict[str, Any], name: str, default: bool) -> bool:
    value = body.get(name, default)
    if not isinstance(value, bool):
        raise BadCall(f"{name}: must be true or false")
    return value


@dataclass
class ApiService:
    jobs: Jobs
    max_pages: int
    scrape_timeout: float
    #: captures of the crawl's WARC archive (maxAge), or None without WARC_ENABLED
    archive: ArchiveLookup | None = None
    #: the URLs the frontier and the archive know, which a map adds
    known: KnownUrls | None = None

    #: when (the loop's clock) ended calls are next swept; the task doing it
    _next_sweep: float = 0.0
    _sweeping: asyncio.Task | None = None

    async def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.to_thread(fn, *args)

    def _sweep_now_and_then(self) -> None:
        """At most once a SWEEP_EVERY, beside the call that comes: the calls that
        ended API_RESULTS_TTL ago forgotten (``Jobs.sweep``)."""
        loop = asyncio.get_running_loop()
        if loop.time() < self._next_sweep or (self._sweeping and not self._sweeping.done()):
            return
        self._next_sweep = loop.time() + SWEEP_EVERY

        async def sweep() -> None:
            try:
                forgotten = await self._call(self.jobs.sweep, time.time())
                if forgotten:
                    logger.info("forgot %d API calls that ended long ago", forgotten)
            except Exception as exc:  # Redis away: the next sweep tries again
                logger.warning("the sweep of ended API calls failed: %s", exc)

        self._sweeping = asyncio.create_task(sweep())

    def _ended(self, figures: Any) -> bool:
        return not figures.pending and bool(figures.done or figures.dlq)

    async def scrape(self, body: dict[str, Any]) -> dict[str, Any]:
        self._sweep_now_and_then()
        options, names = _scrape_options(body)
        timeout = self.scrape_timeout
        given = integer(body, "timeout", 1)
        if given is not None:
            timeout = min(timeout, given / 1000)
        max_age = integer(body, "maxAge", 0)
        warning = _warning(body, SCRAPE_OPTIONS, names)
        if self.archive is not None and (max_age is None or max_age > 0):
            url = self.jobs.checked_url(body.get("url"))
            age = (MAX_AGE if max_age is None else max_age) / 1000
            found = await self._call(self.archive.document, url, age, options)
            if found is not None:
                return {"success": True, "data": found, "warning": warning}
        job: Job = await self._call(self.jobs.start, "scrape", body.get("url"), options)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            found = await self._call(self.jobs.results, job.id, 0, 1)
            if found:
                await self._call(self.jobs.forget, job.id, False)  # (no scope)
                if self.archive is not None:
                    found[0]["metadata"]["cacheState"] = "miss"
                return {"success": True, "data": found[0], "warning": warning}
            if self._ended(await self._call(self.jobs.crawls.figures, job.id)):
                await asyncio.sleep(POLL)  # (its page, if it made one, is in by now)
                if not await self._call(self.jobs.results, job.id, 0, 1):
                    reason = await self._call(self.jobs.failure, job)
                    await self._call(self.jobs.forget, job.id, False)  # (no scope)
                    raise ApiError(502, f"Failed to scrape {job.url}: {reason}")
            await asyncio.sleep(POLL)
        await self._call(self.jobs.crawls.stop, job.id)
        raise ApiError(408, f"Scrape timed out after {timeout:g} s: no node of the API's "
                            "spider fetched the page in time")  # fmt: skip

    async def crawl(
        self, body: dict[str, Any], base: str = "", max_pages: int | None = None
    ) -> dict[str, Any]:
        """A crawl's start; ``max_pages`` its caller's quota (API_MAX_PAGES unless
        its key has one of its own)."""
        self._sweep_now_and_then()
        options = body.get("scrapeOptions") or {}
        if not isinstance(options, dict):
            raise BadCall("scrapeOptions: must be an object")
        scrape_options, names = _scrape_options(options)
        most = max_pages or self.max_pages
        limit = integer(body, "limit", 1, most) or most
        depth = integer(body, "maxDiscoveryDepth", 0)
        paths = {}
        for name in ("includePaths", "excludePaths"):
            value = body.get(name) or []
            if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
                raise BadCall(f"{name}: must be a list of regular expressions")
            paths[name] = value
        sitemap = body.get("sitemap", "include")
        if sitemap not in SITEMAP:
            raise BadCall(f"sitemap: one of {', '.join(SITEMAP)}")
        external, subdomains, domain = (
            _flag(body, name, False)
            for name in ("allowExternalLinks", "allowSubdomains", "crawlEntireDomain")
        )
        kind = ("any" if external else "domain" if subdomains
                else "host" if domain else "prefix")  # fmt: skip
        url = body.get("url")
        scope: dict[str, Any] = {"scope": kind, "sitemaps": sitemap}
        if depth is not None:
            scope["max_depth"] = depth
        if isinstance(url, str):
            scope.update(path_filters(paths["includePaths"], paths["excludePaths"], url.strip()))
        job = await self._call(partial(self.jobs.start, "crawl", url, scrape_options,
                                       limit=limit, scope=scope))  # fmt: skip
        warning = _warning(body, CRAWL_OPTIONS, names)
        return {"success": True, "id": job.id, "url": f"{base}/v2/crawl/{job.id}",
                "warning": warning}  # fmt: skip

    async def _crawl_job(self, crawl: str) -> Job:
        job = await self._call(self.jobs.job, crawl)
        if job is None or job.kind != "crawl":
            raise ApiError(404, f"Crawl job {crawl[:80]!r} not found")
        return job

    async def crawl_status(self, crawl: str, skip: int = 0, base: str = "") -> dict[str, Any]:
        job = await self._crawl_job(crawl)
        figures = await self._call(self.jobs.crawls.figures, crawl)
        count = min(await self._call(self.jobs.result_count, crawl), job.limit)  # no more
        page = await self._call(self.jobs.results, crawl, skip, max(min(PAGE, count - skip), 0))
        ended = figures.state in ("stopped", "expired")  # cancelled, or its limit reached
        if count >= job.limit and not ended and not job.cancelled:
            await self._call(self.jobs.crawls.stop, crawl)  # what is left is not wanted
            ended = True
        if job.cancelled:
            status = "cancelled"
        elif ended or self._ended(figures):
            status = "completed"
            await self._call(self.jobs.expire, crawl)
        else:
            status = "scraping"
        after = skip + len(page)
        more = after < count or status == "scraping"
        expires = dt.datetime.fromtimestamp(job.created + self.jobs.ttl, dt.UTC)
        return {
            "success": True, "status": status, "total": count + figures.pending,
            "completed": count, "creditsUsed": count, "expiresAt": expires.isoformat(),
            "next": f"{base}/v2/crawl/{crawl}?skip={after}" if more else None,
            "data": page,
        }  # fmt: skip

    async def cancel(self, crawl: str) -> dict[str, Any]:
        await self._crawl_job(crawl)
        figures = await self._call(self.jobs.crawls.figures, crawl)
        if figures.state in ("running", "paused") and not self._ended(figures):
            await self._call(self.jobs.cancel, crawl)
            return {"success": True, "status": "cancelled"}
        raise ApiError(409, "the crawl has ended already")

    async def map(self, body: dict[str, Any], max_pages: int | None = None) -> dict[str, Any]:
        most = max_pages or self.max_pages
        limit = integer(body, "limit", 1, most) or min(MAP_LIMIT, most)
        sitemap = body.get("sitemap", "include")
        if sitemap not in SITEMAP:
            raise BadCall(f"sitemap: one of {', '.join(SITEMAP)}")
        subdomains = _flag(body, "includeSubdomains", True)
        search = body.get("search")
        if search is not None and not isinstance(search, str):
            raise BadCall("search: must be a string")
        scope = {"scope": "domain" if subdomains else "host", "sitemaps": sitemap}
        also = () if sitemap == "only" else ("/llms.txt",)
        job = await self._call(partial(self.jobs.start, "map", body.get("url"), {}, limit=limit,
                                       scope=scope, also=also))  # fmt: skip
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.scrape_timeout
        warning = _warning(body, MAP_OPTIONS, [])
        while loop.time() < deadline:
            if self._ended(await self._call(self.jobs.crawls.figures, job.id)):
                break
            await asyncio.sleep(POLL)
        else:
            await self._call(self.jobs.crawls.stop, job.id)
            warning = "; ".join(filter(None, [warning, "timed out: the URLs found so far"]))
        found = await self._call(self.jobs.results, job.id, 0, MAP_READ)
        await self._call(self.jobs.forget, job.id)
        urls = [job.url, *(d["url"] for d in found if isinstance(d.get("url"), str))]
        if self.known is not None and sitemap != "only":
            urls += await self._call(self.known.urls, job.url, subdomains, limit)
        if search:
            urls = [u for u in urls if search.lower() in u.lower()]
        links = [{"url": url} for url in list(dict.fromkeys(urls))[:limit]]
        return {"success": True, "links": links, "warning": warning}
