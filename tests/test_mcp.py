"""``scrapy mcp``, driven by the official ``mcp`` SDK's client: over streamable
HTTP with a key, the tools listed, a site crawled to completion through
``crawl`` and ``crawl_status`` (every document read once, the limit held) and
searched; over stdio, as an MCP client starts it, a page scraped; no key, no
call."""

from __future__ import annotations

import asyncio
import json
import sys
import urllib.error
import urllib.request
from collections import Counter

import httpx2
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from servers import services
from tests.conftest import ROOT, site_hits
from tests.test_api import KEY, start_api

TOOLS = {"scrape", "crawl", "crawl_status", "cancel_crawl", "map", "search_documents",
         "archive_lookup"}  # fmt: skip
#: looks at a crawl's status at most (a second apart)
LOOKS = 240


async def _crawl_to_completion(session: ClientSession, url: str) -> tuple[dict, list[dict]]:
    started = await session.call_tool(
        "crawl", {"url": url, "include_paths": ["^/category/"], "limit": 10}
    )
    assert not started.is_error, started.content
    crawl_id = started.structured_content["id"]
    documents: list[dict] = []
    skip = 0
    for _ in range(LOOKS):
        answer = await session.call_tool("crawl_status", {"id": crawl_id, "skip": skip})
        assert not answer.is_error, answer.content
        status = answer.structured_content
        documents += status["data"]
        if status["next_skip"] is None:
            return status | {"id": crawl_id}, documents
        if status["next_skip"] == skip:
            await asyncio.sleep(1)
        skip = status["next_skip"]
    raise AssertionError(f"the crawl did not complete in {LOOKS} looks: {status}")


def test_an_mcp_client_crawls_a_site_to_completion_over_http_with_a_key(
    redis_url, small_shop, nodes, tmp_path
):
    base, proc = start_api(redis_url, tmp_path, command=("mcp", "web", "--http"))
    try:
        request = urllib.request.Request(base + "/mcp", data=b"{}", method="POST")
        try:
            urllib.request.urlopen(request, timeout=30)
            raise AssertionError("a call without a key was taken")
        except urllib.error.HTTPError as error:
            assert error.code == 401 and "API key" in json.load(error)["error"]

        nodes.start("web", redis_url, NODE_ID="w1")

        async def session_run():
            headers = {"Authorization": f"Bearer {KEY}"}
            async with (
                httpx2.AsyncClient(headers=headers, timeout=60) as http,
                streamable_http_client(base + "/mcp", http_client=http) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                listed = {tool.name for tool in (await session.list_tools()).tools}
                status, documents = await _crawl_to_completion(session, small_shop.url + "/")
                found = await session.call_tool(
                    "search_documents", {"query": "garden", "crawl_id": status["id"]}
                )
                bad = await session.call_tool("crawl", {"url": "ftp://a.test/"})
                return listed, status, documents, found, bad

        listed, status, documents, found, bad = asyncio.run(session_run())
    finally:
        services.stop(proc)
    assert listed == TOOLS
    assert status["status"] == "completed", status
    urls = [doc["metadata"]["sourceURL"] for doc in documents]
    assert len(urls) == len(set(urls)) == 10  # each document once, the limit held
    paths = {u.removeprefix(small_shop.url) for u in urls}
    assert all(p.startswith("/category/") for p in paths - {"/"}), paths
    assert all(doc["markdown"] for doc in documents)
    results = found.structured_content["results"]
    assert results and all("garden" in (r["snippet"] + str(r["title"])).lower() for r in results)
    assert bad.is_error and "url:" in bad.content[0].text  # one clear error
    hits = Counter(site_hits(small_shop))
    assert all(hits[p] == 1 for p in paths)  # each page fetched once, as by any crawl


def test_an_mcp_client_scrapes_over_stdio(redis_url, small_shop, nodes, tmp_path):
    nodes.start("web", redis_url, NODE_ID="w1")
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "scrapy", "mcp", "web", "-s", f"REDIS_URL={redis_url}"],
        cwd=str(ROOT),
    )  # fmt: skip

    async def session_run():
        with (tmp_path / "mcp-stdio.log").open("w") as errlog:
            async with (
                stdio_client(server, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                listed = {tool.name for tool in (await session.list_tools()).tools}
                page = await session.call_tool("scrape", {"url": small_shop.url + "/about"})
                return listed, page

    listed, page = asyncio.run(asyncio.wait_for(session_run(), 180))
    assert listed == TOOLS
    assert not page.is_error, page.content
    assert "A shop that never changes." in page.structured_content["data"]["markdown"]
