"""``/directory/``: a web directory laid out as DMOZ's was, for scrapy-redis's
example project (its ``dmoz`` spider follows ``.top-cat``, ``.sub-cat`` and
``.cat-item`` links and scrapes each ``.title-and-desc`` listing).

Four top categories of four subcategories of three leaves: 69 pages, none
linking to the shop. Every subcategory is linked from its top category and from
the one before it, every leaf from its subcategory and the one before it, so a
page is still found when one page that links to it is lost. A leaf links back
up through its breadcrumb only (not a followed class of ``dmoz``'s rules).
"""

from __future__ import annotations

import html

from aiohttp import web

TOPICS = {
    "Arts": ["Music", "Movies", "Literature", "Photography"],
    "Business": ["Finance", "Retail", "Energy", "Transport"],
    "Computers": ["Software", "Hardware", "Internet", "Security"],
    "Science": ["Physics", "Biology", "Chemistry", "Astronomy"],
}
LEAVES = ["Guides", "Organizations", "Directories"]
SITES_PER_PAGE = 3
ROOT = "/directory/"


def category_paths() -> list[str]:
    """Every page of the directory, the root first."""
    paths = [ROOT]
    for top, subs in TOPICS.items():
        paths.append(f"{ROOT}{top}/")
        for sub in subs:
            paths.append(f"{ROOT}{top}/{sub}/")
            paths.extend(f"{ROOT}{top}/{sub}/{leaf}/" for leaf in LEAVES)
    return paths


def _page(title: str, body: str) -> web.Response:
    text = (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>DMOZ - {html.escape(title)}</title></head><body>{body}</body></html>"
    )
    return web.Response(text=text, content_type="text/html")


def _links(css: str, paths: list[str]) -> str:
    items = "".join(
        f"<li><a href='{path}'>{html.escape(path.rstrip('/').rsplit('/', 1)[1])}</a></li>"
        for path in paths
    )
    return f"<ul class='{css}'>{items}</ul>"


def _listings(where: str) -> str:
    slug = where.strip("/").replace("/", "-").lower()
    return "".join(
        "<div class='title-and-desc'>"
        f"<a href='http://www.{slug}-{n}.example/'><div class='site-title'>"
        f"{html.escape(where)} site {n}</div></a>"
        f"<div class='site-descr'> Site number {n} listed under {html.escape(where)}. </div>"
        "</div>"
        for n in range(1, SITES_PER_PAGE + 1)
    )


def _breadcrumb(parts: list[str]) -> str:
    crumbs = [f"<a href='{ROOT}'>Top</a>"]
    for depth in range(1, len(parts)):
        path = ROOT + "/".join(parts[:depth]) + "/"
        crumbs.append(f"<a href='{path}'>{html.escape(parts[depth - 1])}</a>")
    return f"<div class='breadcrumb'>{' : '.join(crumbs)}</div>"


def _next(names: list[str], name: str) -> str:
    return names[(names.index(name) + 1) % len(names)]


async def directory(request: web.Request) -> web.Response:
    parts = [p for p in request.match_info.get("path", "").split("/") if p]
    tops = list(TOPICS)
    if not parts:
        return _page("Top", _links("top-cat", [f"{ROOT}{t}/" for t in tops]))
    top = parts[0]
    if top not in TOPICS or len(parts) > 3 or not request.path.endswith("/"):
        raise web.HTTPNotFound()
    subs = TOPICS[top]
    where = "/".join(parts)
    body = _breadcrumb(parts)
    if len(parts) == 1:
        also = TOPICS[_next(tops, top)]
        body += _links("sub-cat", [f"{ROOT}{top}/{s}/" for s in subs])
        body += _links("cat-item", [f"{ROOT}{_next(tops, top)}/{s}/" for s in also])
    elif parts[1] not in subs:
        raise web.HTTPNotFound()
    elif len(parts) == 2:
        sub = parts[1]
        body += _links("cat-item", [f"{ROOT}{top}/{sub}/{leaf}/" for leaf in LEAVES])
        body += _links("cat-item", [f"{ROOT}{top}/{_next(subs, sub)}/{leaf}/" for leaf in LEAVES])
    elif parts[2] not in LEAVES:
        raise web.HTTPNotFound()
    return _page(where.replace("/", ": "), body + _listings(where))


def add_routes(app: web.Application) -> None:
    app.router.add_get(ROOT, directory)
    app.router.add_get(ROOT + "{path:.+}", directory)
