"""The routes of ``scrapy api``: Firecrawl's v2 shapes for what the cluster does.

* ``POST /v2/scrape``: one URL fetched now through the cluster, answered with
  the formats asked for (``markdown``, ``html``, ``rawHtml``, ``links``) and
  its ``metadata``;
* ``POST /v2/crawl``: a crawl id with its scope from ``includePaths``,
  ``excludePaths``, ``maxDiscoveryDepth``, ``limit``, ``allowSubdomains``,
  ``crawlEntireDomain``, ``allowExternalLinks`` and ``sitemap``;
  ``GET /v2/crawl/{id}`` its status and documents, paged with ``next``;
  ``DELETE /v2/crawl/{id}`` stops it;
* ``POST /v2/map``: the URLs a site lists (its sitemaps, its ``llms.txt``, the
  links of the page asked), no page of them fetched.

Every call needs ``Authorization: Bearer KEY`` (401 without), within its key's
calls a minute (429). Errors are ``{"success": false, "error": ...}``. Options
Firecrawl defines that the cluster does not act on are accepted and named in
the answer's ``warning``; a malformed value is a 400. Redis is read in worker
threads: the loop never waits on it.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from aiohttp import web
from redis import exceptions as redis_errors

from extensions.api.apikeys import ApiKeys, RateLimit
from extensions.api.documents import FORMATS, format_names
from extensions.api.jobs import BadCall, Job, Jobs, path_filters

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

logger = logging.getLogger(__name__)

#: documents one GET /v2/crawl/{id} answers at most
PAGE = 100
#: seconds between looks at a scrape's results
POLL = 0.1
#: the options of a scrape (and a crawl's scrapeOptions) the cluster acts on
SCRAPE_OPTIONS = {"url", "formats", "onlyMainContent", "timeout"}
CRAWL_OPTIONS = {"url", "includePaths", "excludePaths", "maxDiscoveryDepth", "limit",
                 "allowSubdomains", "crawlEntireDomain", "allowExternalLinks", "sitemap",
                 "scrapeOptions"}  # fmt: skip
SITEMAP = ("include", "skip", "only")
MAP_OPTIONS = {"url", "limit", "sitemap", "includeSubdomains", "search"}
#: URLs a map answers unless its call says fewer (Firecrawl's default)
MAP_LIMIT = 5000
#: results a map reads at most (its sitemaps may list the same URL many times)
MAP_READ = 100_000


@dataclass
class Api:
    jobs: Jobs
    keys: ApiKeys
    rate: RateLimit
    max_pages: int
    scrape_timeout: float


def failure(status: int, error: str, **more: Any) -> web.Response:
    return web.json_response({"success": False, "error": error, **more}, status=status)


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


def _integer(body: dict[str, Any], name: str, low: int, high: int | None = None) -> int | None:
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


def make_app(api: Api) -> web.Application:
    async def call(fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.to_thread(fn, *args)

    @web.middleware
    async def guard(request: web.Request, handler: Callable[[web.Request], Awaitable[Any]]):
        key = api.keys.identify(request.headers.get("Authorization"))
        if key is None:
            return failure(401, "Unauthorized: give an API key as Authorization: Bearer KEY")
        try:
            wait = await call(api.rate.take, key)
            if wait:
                said = "Rate limit exceeded: the key's calls a minute (API_RATE_LIMIT)"
                return failure(429, said, retryAfter=round(wait))
            return await handler(request)
        except BadCall as exc:
            return failure(400, f"Bad Request: {exc}")
        except redis_errors.RedisError as exc:
            logger.error("Redis failed an API call: %s", exc)
            return failure(503, "the cluster's Redis cannot be reached; try again")

    async def body_of(request: web.Request) -> dict[str, Any]:
        try:
            body = await request.json()
        except (ValueError, UnicodeDecodeError):
            raise BadCall("the body is not JSON") from None
        if not isinstance(body, dict):
            raise BadCall("the body must be a JSON object")
        return body

    async def scrape(request: web.Request) -> web.Response:
        body = await body_of(request)
        options, names = _scrape_options(body)
        timeout = api.scrape_timeout
        given = _integer(body, "timeout", 1)
        if given is not None:
            timeout = min(timeout, given / 1000)
        job: Job = await call(api.jobs.start, "scrape", body.get("url"), options)
        deadline = asyncio.get_running_loop().time() + timeout
        warning = _warning(body, SCRAPE_OPTIONS, names)
        while asyncio.get_running_loop().time() < deadline:
            found = await call(api.jobs.results, job.id, 0, 1)
            if found:
                await call(api.jobs.forget, job.id)
                return web.json_response({"success": True, "data": found[0], "warning": warning})
            figures = await call(api.jobs.crawls.figures, job.id)
            if not figures.pending and (figures.done or figures.dlq):
                await asyncio.sleep(POLL)  # (its page, if it made one, is in by now)
                if not await call(api.jobs.results, job.id, 0, 1):
                    reason = await call(api.jobs.failure, job)
                    await call(api.jobs.forget, job.id)
                    return failure(502, f"Failed to scrape {job.url}: {reason}")
            await asyncio.sleep(POLL)
        await call(api.jobs.crawls.stop, job.id)
        return failure(408, f"Scrape timed out after {timeout:g} s: no node of the API's "
                            "spider fetched the page in time")  # fmt: skip

    async def crawl(request: web.Request) -> web.Response:
        body = await body_of(request)
        options = body.get("scrapeOptions") or {}
        if not isinstance(options, dict):
            raise BadCall("scrapeOptions: must be an object")
        scrape_options, names = _scrape_options(options)
        limit = _integer(body, "limit", 1, api.max_pages) or api.max_pages
        depth = _integer(body, "maxDiscoveryDepth", 0)
        paths = {}
        for name in ("includePaths", "excludePaths"):
            value = body.get(name) or []
            if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
                raise BadCall(f"{name}: must be a list of regular expressions")
            paths[name] = value
        sitemap = body.get("sitemap", "include")
        if sitemap not in SITEMAP:
            raise BadCall(f"sitemap: one of {', '.join(SITEMAP)}")
        for flag in ("allowSubdomains", "crawlEntireDomain", "allowExternalLinks"):
            if not isinstance(body.get(flag, False), bool):
                raise BadCall(f"{flag}: must be true or false")
        kind = ("any" if body.get("allowExternalLinks") else "domain" if body.get("allowSubdomains")
                else "host" if body.get("crawlEntireDomain") else "prefix")  # fmt: skip
        url = body.get("url")
        scope: dict[str, Any] = {"scope": kind, "sitemaps": sitemap}
        if depth is not None:
            scope["max_depth"] = depth
        if isinstance(url, str):
            scope.update(path_filters(paths["includePaths"], paths["excludePaths"], url.strip()))
        job = await call(partial(api.jobs.start, "crawl", url, scrape_options, limit=limit,
                                 scope=scope))  # fmt: skip
        base = f"{request.url.origin()}/v2/crawl/{job.id}"
        warning = _warning(body, CRAWL_OPTIONS, names)
        return web.json_response({"success": True, "id": job.id, "url": base, "warning": warning})

    async def crawl_status(request: web.Request) -> web.Response:
        crawl = request.match_info["id"]
        job = await call(api.jobs.job, crawl)
        if job is None or job.kind != "crawl":
            return failure(404, f"Crawl job {crawl[:80]!r} not found")
        try:
            skip = max(int(request.query.get("skip", "0")), 0)
        except ValueError:
            raise BadCall("skip: must be a whole number") from None
        figures = await call(api.jobs.crawls.figures, crawl)
        count = min(await call(api.jobs.result_count, crawl), job.limit)  # its limit, no more
        page = await call(api.jobs.results, crawl, skip, max(min(PAGE, count - skip), 0))
        ended = figures.state in ("stopped", "expired")  # cancelled, or its limit reached
        if count >= job.limit and not ended and not job.cancelled:
            await call(api.jobs.crawls.stop, crawl)  # what it has left to fetch is not wanted
            ended = True
        if job.cancelled:
            status = "cancelled"
        elif ended or (not figures.pending and (figures.done or figures.dlq)):
            status = "completed"
            await call(api.jobs.expire, crawl)
        else:
            status = "scraping"
        after = skip + len(page)
        more = after < count or status == "scraping"
        expires = dt.datetime.fromtimestamp(job.created + api.jobs.ttl, dt.UTC)
        return web.json_response({
            "success": True, "status": status, "total": count + figures.pending,
            "completed": count, "creditsUsed": count, "expiresAt": expires.isoformat(),
            "next": f"{request.url.origin()}/v2/crawl/{crawl}?skip={after}" if more else None,
            "data": page,
        })  # fmt: skip

    async def crawl_cancel(request: web.Request) -> web.Response:
        crawl = request.match_info["id"]
        job = await call(api.jobs.job, crawl)
        if job is None or job.kind != "crawl":
            return failure(404, f"Crawl job {crawl[:80]!r} not found")
        figures = await call(api.jobs.crawls.figures, crawl)
        if figures.state in ("running", "paused") and not (
            not figures.pending and (figures.done or figures.dlq)
        ):
            await call(api.jobs.cancel, crawl)
            return web.json_response({"success": True, "status": "cancelled"})
        return failure(409, "the crawl has ended already")

    async def map_site(request: web.Request) -> web.Response:
        body = await body_of(request)
        limit = _integer(body, "limit", 1, api.max_pages) or min(MAP_LIMIT, api.max_pages)
        sitemap = body.get("sitemap", "include")
        if sitemap not in SITEMAP:
            raise BadCall(f"sitemap: one of {', '.join(SITEMAP)}")
        subdomains = body.get("includeSubdomains", True)
        if not isinstance(subdomains, bool):
            raise BadCall("includeSubdomains: must be true or false")
        search = body.get("search")
        if search is not None and not isinstance(search, str):
            raise BadCall("search: must be a string")
        scope = {"scope": "domain" if subdomains else "host", "sitemaps": sitemap}
        also = () if sitemap == "only" else ("/llms.txt",)
        job = await call(partial(api.jobs.start, "map", body.get("url"), {}, limit=limit,
                                 scope=scope, also=also))  # fmt: skip
        loop = asyncio.get_running_loop()
        deadline = loop.time() + api.scrape_timeout
        warning = _warning(body, MAP_OPTIONS, [])
        while loop.time() < deadline:
            figures = await call(api.jobs.crawls.figures, job.id)
            if not figures.pending and (figures.done or figures.dlq):
                break
            await asyncio.sleep(POLL)
        else:
            await call(api.jobs.crawls.stop, job.id)
            warning = "; ".join(filter(None, [warning, "timed out: the URLs found so far"]))
        found = await call(api.jobs.results, job.id, 0, MAP_READ)
        await call(api.jobs.forget, job.id)
        urls = [job.url, *(d["url"] for d in found if isinstance(d.get("url"), str))]
        if search:
            urls = [u for u in urls if search.lower() in u.lower()]
        links = [{"url": url} for url in list(dict.fromkeys(urls))[:limit]]
        return web.json_response({"success": True, "links": links, "warning": warning})

    async def not_found(request: web.Request) -> web.Response:
        return failure(404, f"no such endpoint: {request.method} {request.path[:100]}")

    app = web.Application(middlewares=[guard], client_max_size=1 << 20)
    app.router.add_post("/v2/scrape", scrape)
    app.router.add_post("/v2/crawl", crawl)
    app.router.add_get("/v2/crawl/{id}", crawl_status)
    app.router.add_delete("/v2/crawl/{id}", crawl_cancel)
    app.router.add_post("/v2/map", map_site)
    app.router.add_route("*", "/{tail:.*}", not_found)
    return app
