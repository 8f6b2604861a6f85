"""The routes of ``scrapy api``: Firecrawl's v2 shapes for what the cluster does
(each call's work: ``service.py``).

* ``POST /v2/scrape``: one URL fetched now through the cluster (or its capture
  in the archive, ``maxAge``), answered with the formats asked for
  (``markdown``, ``html``, ``rawHtml``, ``links``) and its ``metadata``;
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
the answer's ``warning``; a malformed value is a 400.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from aiohttp import web
from redis import exceptions as redis_errors

from extensions.api.jobs import BadCall
from extensions.api.service import ApiError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from extensions.api.apikeys import ApiKeys, RateLimit
    from extensions.api.service import ApiService

logger = logging.getLogger(__name__)


def failure(status: int, error: str, **more: Any) -> web.Response:
    return web.json_response({"success": False, "error": error, **more}, status=status)


async def body_of(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except (ValueError, UnicodeDecodeError):
        raise BadCall("the body is not JSON") from None
    if not isinstance(body, dict):
        raise BadCall("the body must be a JSON object")
    return body


def make_app(service: ApiService, keys: ApiKeys, rate: RateLimit) -> web.Application:
    @web.middleware
    async def guard(request: web.Request, handler: Callable[[web.Request], Awaitable[Any]]):
        key = keys.identify(request.headers.get("Authorization"))
        if key is None:
            return failure(401, "Unauthorized: give an API key as Authorization: Bearer KEY")
        quota = keys.quota(key)
        request["quota"] = quota
        try:
            wait = await asyncio.to_thread(rate.take, key, None, quota.rate_limit)
            if wait:
                said = "Rate limit exceeded: the key's calls a minute (API_RATE_LIMIT)"
                return failure(429, said, retryAfter=round(wait))
            return await handler(request)
        except BadCall as exc:
            return failure(400, f"Bad Request: {exc}")
        except ApiError as exc:
            return failure(exc.status, exc.error, **exc.more)
        except redis_errors.RedisError as exc:
            logger.error("Redis failed an API call: %s", exc)
            return failure(503, "the cluster's Redis cannot be reached; try again")
        except web.HTTPException:  # aiohttp's own answers (a body past its size)
            raise
        except Exception:  # a fault of this server's: said in Firecrawl's shape, logged whole
            logger.exception("%s %s failed", request.method, request.path[:100])
            return failure(500, "Internal Server Error: the API server failed this call")

    def origin(request: web.Request) -> str:
        return str(request.url.origin())

    async def scrape(request: web.Request) -> web.Response:
        return web.json_response(await service.scrape(await body_of(request)))

    async def crawl(request: web.Request) -> web.Response:
        body = await body_of(request)
        answer = await service.crawl(body, origin(request), request["quota"].max_pages)
        return web.json_response(answer)

    async def crawl_status(request: web.Request) -> web.Response:
        try:
            skip = max(int(request.query.get("skip", "0")), 0)
        except ValueError:
            raise BadCall("skip: must be a whole number") from None
        return web.json_response(
            await service.crawl_status(request.match_info["id"], skip, origin(request))
        )

    async def crawl_cancel(request: web.Request) -> web.Response:
        return web.json_response(await service.cancel(request.match_info["id"]))

    async def map_site(request: web.Request) -> web.Response:
        body = await body_of(request)
        return web.json_response(await service.map(body, request["quota"].max_pages))

    async def not_found(request: web.Request) -> web.Response:
        raise ApiError(404, f"no such endpoint: {request.method} {request.path[:100]}")

    app = web.Application(middlewares=[guard], client_max_size=1 << 20)
    app.router.add_post("/v2/scrape", scrape)
    app.router.add_post("/v2/crawl", crawl)
    app.router.add_get("/v2/crawl/{id}", crawl_status)
    app.router.add_delete("/v2/crawl/{id}", crawl_cancel)
    app.router.add_post("/v2/map", map_site)
    app.router.add_route("*", "/{tail:.*}", not_found)
    return app
