"""Crawler traps, under ``/trap/`` (never linked from the shop).

* ``/trap/calendar/YYYY-MM-DD`` links to the next and the previous day, for ever;
* ``/trap/loop/...`` links to ``a/`` and ``b/`` below itself, so the path
  repeats its segments without end (``/trap/loop/a/b/a/b/...``);
* ``/trap/search?color=C&size=S`` links to other combinations of the filters,
  a new query string on the same path at every step.

``/trap/`` links to the start of each.
"""

from __future__ import annotations

import datetime
import html
import zlib

from aiohttp import web

from demosite.hostile import _html

FILTER_LINKS = 4  # other filter combinations each search page links to


async def index(request: web.Request) -> web.Response:
    links = ["/trap/calendar/2026-01-01", "/trap/loop/", "/trap/search?color=1&size=1"]
    return _html("Traps", "".join(f'<a href="{link}">{link}</a> ' for link in links))


async def calendar(request: web.Request) -> web.Response:
    try:
        day = datetime.date.fromisoformat(request.match_info["day"])
    except ValueError:
        raise web.HTTPNotFound() from None
    links = [day + datetime.timedelta(days=1), day - datetime.timedelta(days=1)]
    anchors = "".join(f'<a href="/trap/calendar/{d.isoformat()}">{d}</a> ' for d in links)
    return _html(f"Calendar {day}", anchors)


async def loop(request: web.Request) -> web.Response:
    # the path as a breadcrumb, as such pages often show it: each page differs
    # (one that did not would be a content duplicate, whose links are not followed)
    crumbs = html.escape(request.path[:300])
    return _html("Loop", f'<p>{crumbs}</p><a href="a/">a</a> <a href="b/">b</a>')


async def search(request: web.Request) -> web.Response:
    seed = zlib.crc32(request.query_string.encode())
    anchors = "".join(
        f'<a href="/trap/search?color={(seed + n) % 997}&size={(seed // 7 + n) % 991}">{n}</a> '
        for n in range(FILTER_LINKS)
    )
    return _html("Search", anchors)


def add_routes(app: web.Application) -> None:
    app.router.add_get("/trap/", index)
    app.router.add_get("/trap/calendar/{day}", calendar)
    app.router.add_get("/trap/loop/{rest:.*}", loop)
    app.router.add_get("/trap/search", search)
