"""Pages that fail on purpose (``/flaky/``) and pages that change (``/changing/``),
neither linked from the shop: what retries, Retry-After, timeouts and recrawls
with validators are tested on."""

from __future__ import annotations

import asyncio
import time

from aiohttp import web

from demosite.layout import page

FLAKY_KINDS = ("503-twice", "429", "500", "timeout-once")
FLAKY_PER_KIND = 3
RETRY_AFTER = 2  # seconds asked for by /flaky/429/N
SLOW_ANSWER = 10  # seconds the first answer of /flaky/timeout-once/N takes


async def flaky_index(request: web.Request) -> web.Response:
    links = "".join(
        f"<li><a href='/flaky/{kind}/{n}'>{kind} {n}</a></li>"
        for kind in FLAKY_KINDS
        for n in range(1, FLAKY_PER_KIND + 1)
    )
    return page("Flaky pages", f"<h1>Flaky pages</h1><ul>{links}</ul>")


async def flaky(request: web.Request) -> web.Response:
    kind = request.match_info["kind"]
    if kind not in FLAKY_KINDS:
        raise web.HTTPNotFound()
    seen = request.app["hits"][request.path_qs]  # this request included
    if kind == "500" or (kind == "503-twice" and seen <= 2):
        status = 500 if kind == "500" else 503
        return web.Response(status=status, text=f"failing on purpose ({kind})")
    if kind == "429" and seen == 1:
        return web.Response(status=429, headers={"Retry-After": str(RETRY_AFTER)})
    if kind == "timeout-once" and seen == 1:
        await asyncio.sleep(SLOW_ANSWER)
    return page(f"Flaky {kind} {request.match_info['n']}", f"<p>{kind} recovered</p>")


CHANGING_PAGES = 3
CHANGE_EVERY = 3  # requests (304s included) between two versions of a changing page


async def changing_index(request: web.Request) -> web.Response:
    links = "".join(
        f"<li><a href='/changing/{n}'>page {n}</a></li>" for n in range(1, CHANGING_PAGES + 1)
    )
    return page("Changing pages", f"<h1>Changing pages</h1><ul>{links}</ul>")


async def changing(request: web.Request) -> web.Response:
    """A page whose content changes every CHANGE_EVERY requests, with an ETag and
    a Last-Modified per version, answering 304 to a request that has it."""
    n = request.match_info["n"]
    if not n.isdigit() or not 1 <= int(n) <= CHANGING_PAGES:
        raise web.HTTPNotFound()
    version = (request.app["hits"][request.path_qs] - 1) // CHANGE_EVERY
    etag = f'"{n}-v{version}"'
    modified = time.strftime(
        "%a, %d %b %Y %H:%M:%S GMT", time.gmtime(1_767_225_600 + version * 86400)
    )
    validators = {"ETag": etag, "Last-Modified": modified}
    if request.headers.get("If-None-Match") == etag:
        request.app["not_modified"][request.path_qs] += 1
        return web.Response(status=304, headers=validators)
    response = page(f"Changing {n}, version {version}", f"<p>version {version}</p>")
    response.headers.update(validators)
    return response


def add_routes(app: web.Application) -> None:
    app.router.add_get("/flaky/", flaky_index)
    app.router.add_get("/flaky/{kind}/{n}", flaky)
    app.router.add_get("/changing/", changing_index)
    app.router.add_get("/changing/{n}", changing)
