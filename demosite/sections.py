"""``/sections/``: a site of three sections, ``blog/``, ``shop/`` and
``private/``, for crawl scopes. Each section has ``PAGES`` pages, each linking
to the next page of its section, to the same page of the two other sections,
and to a sort order of itself (``?sort=price``): every section is reached from
every other, so only a scope keeps a crawl to some of them."""

from __future__ import annotations

from aiohttp import web

ROOT = "/sections/"
SECTIONS = ("blog", "shop", "private")
PAGES = 40


def section_paths(section: str, pages: int = PAGES) -> list[str]:
    """Every page of a section (its sort orders aside)."""
    return [f"{ROOT}{section}/{n}" for n in range(pages)]


async def home(request: web.Request) -> web.Response:
    links = "".join(f"<li><a href='{ROOT}{s}/0'>{s}</a></li>" for s in SECTIONS)
    return _page("Sections", f"<ul>{links}</ul>")


async def page(request: web.Request) -> web.Response:
    section = request.match_info["section"]
    try:
        number = int(request.match_info["n"])
    except ValueError:
        raise web.HTTPNotFound() from None
    if section not in SECTIONS or not 0 <= number < PAGES:
        raise web.HTTPNotFound()
    links = [f"{ROOT}{section}/{(number + 1) % PAGES}", f"{ROOT}{section}/{number}?sort=price"]
    links += [f"{ROOT}{other}/{number}" for other in SECTIONS if other != section]
    body = "".join(f"<p><a href='{href}'>{href}</a></p>" for href in links)
    return _page(f"{section} {number}", body + "<p>" + "text " * 200 + "</p>")


def _page(title: str, body: str) -> web.Response:
    text = f"<!DOCTYPE html><html><head><title>{title}</title></head><body>{body}</body></html>"
    return web.Response(text=text, content_type="text/html")


def add_routes(app: web.Application) -> None:
    app.router.add_get(ROOT, home)
    app.router.add_get(ROOT + "{section}/{n}", page)
