"""``scrapy mcp``: the API's calls as Model Context Protocol tools (the official
``mcp`` SDK's server), over stdio or streamable HTTP.

The tools do what the HTTP routes do (``service.py``): ``scrape`` (a page, from
the archive when a capture is young enough), ``crawl`` and ``crawl_status`` (a
crawl id and its documents, paged), ``cancel_crawl``, ``map``,
``search_documents`` (the documents of the API's crawls still held) and
``archive_lookup`` (a URL's newest capture). Over HTTP every request needs
``Authorization: Bearer KEY`` with a key of ``API_KEYS`` and is counted against
its calls a minute; over stdio the server is the process of whoever started it
(no key), its calls counted as one key's.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import TYPE_CHECKING, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError  # its message reaches the client
from redis import exceptions as redis_errors

from extensions.api.apikeys import key_hash
from extensions.api.jobs import BadCall
from extensions.api.search import search_documents
from extensions.api.service import ApiError

if TYPE_CHECKING:
    from extensions.api.apikeys import ApiKeys, RateLimit
    from extensions.api.service import ApiService

logger = logging.getLogger(__name__)

#: the calls of a stdio server are counted as this key's
STDIO_KEY = key_hash("stdio")
INSTRUCTIONS = (
    "Reads the web through a Scrapy cluster that keeps every site's robots.txt and rate: "
    "scrape one page to markdown, crawl a site (start with crawl, then poll crawl_status "
    "until its status is completed, following next_skip), map a site's URLs, search the "
    "documents of crawls made here, and look a URL up in the archive."
)


def _drop_none(options: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in options.items() if value is not None}


def build_server(service: ApiService, name: str, rate: RateLimit | None = None) -> MCPServer:
    """The MCP server whose tools call ``service``; with ``rate``, each tool call
    is counted as the stdio key's (over HTTP, ``http_app`` counts each key's)."""
    server = MCPServer(name=f"crawler ({name})", instructions=INSTRUCTIONS)

    async def run(call: Any) -> dict[str, Any]:
        try:
            if rate is not None:
                wait = await asyncio.to_thread(rate.take, STDIO_KEY)
                if wait:
                    call.close()  # never run
                    raise ToolError(f"rate limit: the calls a minute are spent ({wait:.0f} s)")
            return dict(await call)
        except BadCall as exc:
            raise ToolError(f"bad request: {exc}") from None
        except ApiError as exc:
            raise ToolError(f"{exc.status}: {exc.error}") from None
        except redis_errors.RedisError as exc:
            logger.error("Redis failed an MCP call: %s", exc)
            raise ToolError("the cluster's Redis cannot be reached; try again") from None

    @server.tool()
    async def scrape(
        url: str, formats: list[str] | None = None, only_main_content: bool = True,
        max_age: int | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        """Fetch one page through the cluster (or its archived capture no older than
        max_age milliseconds; two days unless said, 0 always fetches) and return it
        as formats: markdown (default), html, rawHtml, links; with its metadata."""
        body = _drop_none({"url": url, "formats": formats or ["markdown"],
                           "onlyMainContent": only_main_content, "maxAge": max_age})  # fmt: skip
        return await run(service.scrape(body))

    @server.tool()
    async def crawl(
        url: str, limit: int | None = None, include_paths: list[str] | None = None,
        exclude_paths: list[str] | None = None, max_discovery_depth: int | None = None,
        allow_subdomains: bool = False, crawl_entire_domain: bool = False,
        sitemap: str = "include",
    ) -> dict[str, Any]:  # fmt: skip
        """Start a crawl of a site from url: at most limit pages, paths matched by
        the regular expressions include_paths and not exclude_paths. Returns its id:
        poll crawl_status with it."""
        body = _drop_none({
            "url": url, "limit": limit, "includePaths": include_paths,
            "excludePaths": exclude_paths, "maxDiscoveryDepth": max_discovery_depth,
            "allowSubdomains": allow_subdomains, "crawlEntireDomain": crawl_entire_domain,
            "sitemap": sitemap,
        })  # fmt: skip
        answer = await run(service.crawl(body))
        return {"id": answer["id"], "warning": answer.get("warning")}

    @server.tool()
    async def crawl_status(id: str, skip: int = 0) -> dict[str, Any]:
        """A crawl's status (scraping, completed, cancelled), its figures and up to
        100 of its documents from skip; next_skip is where the next ones start
        (null once every document was given and the crawl ended)."""
        answer = await run(service.crawl_status(id, max(skip, 0)))
        answer["next_skip"] = skip + len(answer["data"]) if answer.pop("next") else None
        return answer

    @server.tool()
    async def cancel_crawl(id: str) -> dict[str, Any]:
        """Stop a crawl: nothing more of it is fetched."""
        return await run(service.cancel(id))

    @server.tool(name="map")
    async def map_site(
        url: str, limit: int | None = None, search: str | None = None
    ) -> dict[str, Any]:
        """The URLs a site lists (its sitemaps, llms.txt and the page's links),
        none of them fetched; search keeps those that contain it."""
        return await run(service.map(_drop_none({"url": url, "limit": limit, "search": search})))

    @server.tool(name="search_documents")
    async def search(query: str, crawl_id: str | None = None, limit: int = 10) -> dict[str, Any]:
        """Search the documents of the crawls made here (one crawl's with crawl_id):
        the best matches with their URL, title and a snippet."""

        async def found() -> dict[str, Any]:
            return await asyncio.to_thread(search_documents, service.jobs, query, crawl_id,
                                           min(max(limit, 1), 100))  # fmt: skip

        return await run(found())

    @server.tool()
    async def archive_lookup(url: str, content: bool = False) -> dict[str, Any]:
        """The newest capture of url in the crawl's WARC archive: when, its status,
        its file; with content, the page as markdown too."""
        archive = service.archive
        if archive is None:
            raise ToolError("the archive is off (WARC_ENABLED) or keeps no capture index")

        def look() -> dict[str, Any]:
            checked = service.jobs.checked_url(url)
            capture = archive.capture(checked)
            if capture is None:
                return {"url": checked, "archived": False}
            answer: dict[str, Any] = {
                "url": checked, "archived": True, "date": capture.date,
                "status": capture.status, "file": capture.file, "offset": capture.offset,
            }  # fmt: skip
            if content:
                document = archive.document(checked, float("inf"), {"formats": ["markdown"]})
                answer["markdown"] = document.get("markdown") if document else None
            return answer

        async def looked() -> dict[str, Any]:
            return await asyncio.to_thread(look)

        return await run(looked())

    return server


def http_app(server: MCPServer, keys: ApiKeys, rate: RateLimit, bind: str) -> Any:
    """The streamable HTTP app (at ``/mcp``), each request's key checked and
    counted first."""
    app = server.streamable_http_app(host=bind)

    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        authorization = headers.get(b"authorization", b"").decode("latin-1")
        key = keys.identify(authorization)
        status, error = 0, ""
        if key is None:
            status, error = 401, "Unauthorized: give an API key as Authorization: Bearer KEY"
        else:
            try:
                if await asyncio.to_thread(rate.take, key, None, keys.quota(key).rate_limit):
                    status, error = 429, "Rate limit exceeded (API_RATE_LIMIT)"
            except redis_errors.RedisError:
                status, error = 503, "the cluster's Redis cannot be reached; try again"
        if not status:
            return await app(scope, receive, send)
        body = json.dumps({"success": False, "error": error}).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json")]})  # fmt: skip
        await send({"type": "http.response.body", "body": body})
        return None

    return guarded
