"""``/wide/``: a section far wider than deep, as the open web is to a crawler:
each page links to FANOUT new ones, so the queue grows much faster than pages
are fetched. Pages are numbered breadth first: the root links to 1..FANOUT,
page N to N*FANOUT+1 .. N*FANOUT+FANOUT (up to WIDE_PAGES). One node fetching one
page at a time in discovery order fetches them in number order.
"""

from __future__ import annotations

from aiohttp import web

ROOT = "/wide/"
FANOUT = 10
WIDE_PAGES = 1000


def wide_paths() -> list[str]:
    """Every page of the section, in discovery order (the root first)."""
    return [ROOT] + [f"{ROOT}{n}" for n in range(1, WIDE_PAGES + 1)]


def children(n: int) -> list[int]:
    return [c for c in range(n * FANOUT + 1, n * FANOUT + FANOUT + 1) if c <= WIDE_PAGES]


async def wide(request: web.Request) -> web.Response:
    raw = request.match_info.get("n", "0")
    n = int(raw) if raw.isdigit() else -1
    if not 0 <= n <= WIDE_PAGES:
        raise web.HTTPNotFound()
    links = "".join(f"<li><a href='{ROOT}{c}'>page {c}</a></li>" for c in children(n))
    text = (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>Wide page {n}</title></head><body><ul>{links}</ul></body></html>"
    )
    return web.Response(text=text, content_type="text/html")


def add_routes(app: web.Application) -> None:
    app.router.add_get(ROOT, wide)
    app.router.add_get(ROOT + "{n}", wide)
