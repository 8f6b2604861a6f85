"""Pages that attack a crawler, under ``/hostile/`` (never linked from the shop).

* ``/hostile/`` links to local files (``file://127.0.0.1/etc/passwd``,
  ``/dev/zero``), other schemes, a link carrying credentials, an over-long URL,
  the redirects and the pages below, and to ``/hostile/ok/N`` pages;
* ``/hostile/redirect/file``, ``/ftp`` and ``/port`` redirect to a local file,
  an FTP URL and port 1 of this machine;
* ``/hostile/huge?mb=N`` streams N MB (default 64) without a Content-Length;
  ``?length=1`` announces it in a Content-Length header instead;
* ``/hostile/many-links?n=N`` is one page holding N links (default 300,000) to
  ``/hostile/ok/I``;
* ``/hostile/ok/N`` is a harmless page without links.

No page here uses the shop's navigation, so a crawl of them stays here.
"""

from __future__ import annotations

from aiohttp import web

CHUNK = b"<p>" + b"x" * (64 * 1024 - 7) + b"</p>"


def _html(title: str, body: str) -> web.Response:
    text = f"<!DOCTYPE html><html><head><title>{title}</title></head><body>{body}</body></html>"
    return web.Response(text=text, content_type="text/html")


async def index(request: web.Request) -> web.Response:
    port = request.url.port
    links = [
        "file://127.0.0.1/etc/passwd",
        "file://127.0.0.1/dev/zero",
        "file:///etc/hostname",
        f"ftp://127.0.0.1:{port}/hostile/ok/ftp",
        "data:text/html,<a href='/hostile/ok/data'>x</a>",
        f"http://user:hunter2@127.0.0.1:{port}/hostile/ok/credentials",
        "/hostile/ok/" + "a" * 3000,
        "/hostile/redirect/file",
        "/hostile/redirect/ftp",
        "/hostile/redirect/port",
        "/hostile/huge",
        "/hostile/many-links",
        *(f"/hostile/ok/{n}" for n in range(1, 4)),
    ]
    anchors = "".join(f'<a href="{link}">{n}</a> ' for n, link in enumerate(links))
    return _html("Hostile", anchors)


async def redirect(request: web.Request) -> web.Response:
    targets = {
        "file": "file://127.0.0.1/etc/passwd",
        "ftp": f"ftp://127.0.0.1:{request.url.port}/x",
        "port": "http://127.0.0.1:1/",
    }
    target = targets.get(request.match_info["kind"])
    if target is None:
        raise web.HTTPNotFound()
    raise web.HTTPFound(target)


async def huge(request: web.Request) -> web.StreamResponse:
    megabytes = int(request.query.get("mb", "64"))
    chunks = megabytes * 16
    response = web.StreamResponse(headers={"Content-Type": "text/html"})
    if request.query.get("length"):
        response.content_length = chunks * len(CHUNK)
    else:
        response.enable_chunked_encoding()
    await response.prepare(request)
    try:
        for _ in range(chunks):
            await response.write(CHUNK)
    except (ConnectionResetError, RuntimeError):
        pass  # the crawler hung up, as it should
    return response


async def many_links(request: web.Request) -> web.Response:
    count = int(request.query.get("n", "300000"))
    anchors = "".join(f"<a href='/hostile/ok/{i}'>{i}</a>" for i in range(count))
    return _html("Many links", anchors)


async def ok(request: web.Request) -> web.Response:
    return _html(f"OK {request.match_info['n'][:50]}", "<p>harmless</p>")


def add_routes(app: web.Application) -> None:
    app.router.add_get("/hostile/", index)
    app.router.add_get("/hostile/redirect/{kind}", redirect)
    app.router.add_get("/hostile/huge", huge)
    app.router.add_get("/hostile/many-links", many_links)
    app.router.add_get("/hostile/ok/{n}", ok)
