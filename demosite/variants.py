"""``/variants/``: pages reachable under many URLs, as on the open web (never
linked from the shop). ``/variants/`` links to each of ITEMS items; item N
is the page ``/variants/item?colour=red&id=N``, and links to the next items
under the variants a crawler meets: query pairs in another order, tracking
parameters, a ``;jsessionid=`` in the path, a session id in the query, a
fragment. Every variant serves the same page. The index links to itself as
``/variants/index.html``. Each item also links to its
print view, ``/variants/print/N``: the same page under a path no rule knows. A
page says when it was generated, which changes on every load. Asked for under a ``www.`` name (a
mirror), an item page and its print view name the item's URL without the
``www.`` as their ``rel="canonical"``.

``/variants/amp/`` (not linked) lists an AMP version of each item, a page of its
own whose ``rel="canonical"`` names the item's page, which it also links to;
AMP 1's canonical is on another site and AMP 2's is malformed (they link nowhere).

``/variants/stories/`` (not linked) links to each of STORIES stories, each
under STORY_VIEWS ``from=`` values: a story says the same under each, but for a
"recommended" line that names the value: pages a few words apart, which only
their words tell to be one (their digests differ).

``/variants/moved/`` (not linked) links to each item's old URL,
``/variants/old/N``, which redirects (301) to the item's page, and to
``/variants/loop/a``, which redirects to ``/variants/loop/b``, which redirects
back.

``/variants/list?page=N`` (not linked; LIST_PAGES of them) links to the next page
and to itself under five ``sort=`` orders that change nothing: what a crawler can
learn a parameter from. ``page`` changes the page.
"""

from __future__ import annotations

import datetime

from aiohttp import web

from demosite.hostile import _html

ITEMS = 40


def page_path(n: int) -> str:
    """Item ``n``'s URL once normalized (its parameters sorted, nothing else)."""
    return f"/variants/item?colour=red&id={n}"


def variants_of(n: int, seen_from: int) -> list[str]:
    return [
        f"/variants/item?id={n}&colour=red",
        f"/variants/item?id={n}&colour=red&utm_source=feed&utm_medium=web",
        f"/variants/item;jsessionid=S{seen_from}X?colour=red&id={n}",
        f"/variants/item?colour=red&PHPSESSID=p{seen_from}&id={n}",
        f"/variants/item?colour=red&id={n}&fbclid=F{seen_from}#reviews",
    ]


async def index(request: web.Request) -> web.Response:
    links = "".join(f'<a href="/variants/item?id={n}&amp;colour=red">item {n}</a> '
                    for n in range(1, ITEMS + 1))  # fmt: skip
    return _html("Variants", links + '<a href="/variants/index.html">home</a>')


def item_page(n: int, canonical: str = "") -> web.Response:
    links = [v for step in (1, 2, 3) for v in variants_of((n + step - 1) % ITEMS + 1, n)]
    links.append(f"/variants/print/{n}")
    anchors = "".join(f'<a href="{link.replace("&", "&amp;")}">more</a> ' for link in links)
    now = datetime.datetime.now(datetime.UTC).isoformat()
    head = f"<link rel='canonical' href='{canonical}'>" if canonical else ""
    text = (
        f"<!DOCTYPE html><html><head><title>Item {n}</title>{head}</head><body>"
        f"<p>The one page of item {n}.</p>{anchors}<p>Generated {now}</p></body></html>"
    )
    return web.Response(text=text, content_type="text/html")


def mirrored(request: web.Request, n: int) -> str:
    """On a mirror (a www. name) item ``n``'s canonical: the name without it."""
    if not request.host.startswith("www."):
        return ""
    return f"http://{request.host.removeprefix('www.')}{page_path(n)}".replace("&", "&amp;")


async def item(request: web.Request) -> web.Response:
    raw = request.query.get("id", "")
    if not raw.isdigit() or not 1 <= int(raw) <= ITEMS:
        raise web.HTTPNotFound()
    return item_page(int(raw), mirrored(request, int(raw)))


async def print_view(request: web.Request) -> web.Response:
    raw = request.match_info["n"]
    if not raw.isdigit() or not 1 <= int(raw) <= ITEMS:
        raise web.HTTPNotFound()
    return item_page(int(raw), mirrored(request, int(raw)))


LIST_PAGES = 8
SORTS = ("price", "name", "date", "rating", "new")


async def listing(request: web.Request) -> web.Response:
    raw = request.query.get("page", "1")
    if not raw.isdigit() or not 1 <= int(raw) <= LIST_PAGES:
        raise web.HTTPNotFound()
    n = int(raw)
    links = [f"/variants/list?page={n}&amp;sort={s}" for s in SORTS]
    if n < LIST_PAGES:
        links.insert(0, f"/variants/list?page={n + 1}")
    anchors = "".join(f'<a href="{link}">more</a> ' for link in links)
    items = ", ".join(f"item {k}" for k in range(5 * n - 4, 5 * n + 1))
    return _html(f"List page {n}", f"<p>{items}</p>{anchors}")


AMP_BAD_CANONICALS = {1: "http://elsewhere.test/item/1", 2: "http://[bad/item/2"}


async def amp_index(request: web.Request) -> web.Response:
    links = "".join(f'<a href="/variants/amp/{n}">amp {n}</a> ' for n in range(1, ITEMS + 1))
    return _html("AMP pages", links)


async def amp(request: web.Request) -> web.Response:
    raw = request.match_info["n"]
    if not raw.isdigit() or not 1 <= int(raw) <= ITEMS:
        raise web.HTTPNotFound()
    n = int(raw)
    item_url = f"/variants/item?id={n}&amp;colour=red"
    canonical = AMP_BAD_CANONICALS.get(n, item_url)
    link = "" if n in AMP_BAD_CANONICALS else f"<a href='{item_url}'>the page</a>"
    text = (
        f"<!DOCTYPE html><html amp><head><title>Item {n} (AMP)</title>"
        f"<link rel='canonical' href='{canonical}'></head>"
        f"<body><p>Item {n}, quickly.</p>{link}</body></html>"
    )
    return web.Response(text=text, content_type="text/html")


async def moved(request: web.Request) -> web.Response:
    links = [f"/variants/old/{n}" for n in range(1, ITEMS + 1)] + ["/variants/loop/a"]
    return _html("Moved", "".join(f'<a href="{link}">old</a> ' for link in links))


async def old(request: web.Request) -> web.Response:
    raw = request.match_info["n"]
    if not raw.isdigit() or not 1 <= int(raw) <= ITEMS:
        raise web.HTTPNotFound()
    raise web.HTTPMovedPermanently(page_path(int(raw)))


async def loop(request: web.Request) -> web.Response:
    other = {"a": "b", "b": "a"}.get(request.match_info["end"])
    if other is None:
        raise web.HTTPNotFound()
    raise web.HTTPFound(f"/variants/loop/{other}")


STORIES, STORY_VIEWS = 10, 3
SYLLABLES = ("ka", "lo", "mi", "ne", "su", "ta", "ri", "vo", "de", "po", "an", "el")


def story_words(n: int) -> list[str]:
    """Story ``n``'s 400 words, few of them another story's."""
    words, state = [], n * 7919
    for _ in range(400):
        state = (state * 1103515245 + 12345) % 2**31
        parts = [SYLLABLES[(state >> shift) % len(SYLLABLES)] for shift in (3, 7, 11, 15)]
        words.append("".join(parts) + str(n))
    return words


async def stories(request: web.Request) -> web.Response:
    views = [(n, view) for n in range(1, STORIES + 1) for view in range(1, STORY_VIEWS + 1)]
    links = "".join(f'<a href="/variants/story/{n}?from={v}">story {n}</a> ' for n, v in views)
    return _html("Stories", links)


async def story(request: web.Request) -> web.Response:
    raw, view = request.match_info["n"], request.query.get("from", "")
    if not raw.isdigit() or not 1 <= int(raw) <= STORIES or not view.isdigit():
        raise web.HTTPNotFound()
    body = f"<p>{' '.join(story_words(int(raw)))}</p><p>Recommended: story {view}</p>"
    return _html(f"Story {raw}", body)


def add_routes(app: web.Application) -> None:
    app.router.add_get("/variants/", index)
    app.router.add_get("/variants/index.html", index)
    app.router.add_get(r"/variants/item{session:(;[^/?]*)?}", item)
    app.router.add_get("/variants/print/{n}", print_view)
    app.router.add_get("/variants/amp/", amp_index)
    app.router.add_get("/variants/list", listing)
    app.router.add_get("/variants/amp/{n}", amp)
    app.router.add_get("/variants/stories/", stories)
    app.router.add_get("/variants/moved/", moved)
    app.router.add_get("/variants/old/{n}", old)
    app.router.add_get("/variants/loop/{end}", loop)
    app.router.add_get("/variants/story/{n}", story)
