"""Pages JavaScript builds, under ``/js/`` (linked from no shop page).

Each is an empty shell (``<main id="app">``, no ``h1``) and a script that
writes the content and the links:

* ``/js/`` links to ``/js/item/1`` .. ``/js/item/5``, ``/js/list`` and ``/js/data``;
* ``/js/item/N`` (1 .. JS_ITEMS, or the site's ``--js-items``) shows item N (``h1``, ``.price``);
* ``/js/list`` is an endless list: LIST_PAGE items at first, the next page
  loaded from ``/js/api/list?page=K`` each time it is scrolled to the bottom,
  ``list_pages`` pages in all (items 1 .. JS_ITEMS, the last ones linked from
  nowhere else); ``/js/list?slow=MS`` has each page answer MS ms late;
* ``/js/data`` loads ``/js/api/data.json`` with ``fetch`` and shows it as a table.

``/js/hostile/`` (linked from nowhere) holds pages that attack a browser:
``loop`` (a script that never returns), ``alloc`` (allocates without end),
``popup`` (opens windows), ``download`` (a file, not a page) and ``noload``
(its load event never fires: a script that never finishes loading).
"""

from __future__ import annotations

import asyncio
import html

from aiohttp import web

JS_ITEMS = 50
LIST_PAGE = 10
#: how many items the site has (``add_routes``)
ITEMS: web.AppKey[int] = web.AppKey("js_items", int)
HANG_SECONDS = 120.0  # how long /js/hang keeps a page loading


def shell(title: str, script: str, head: str = "") -> web.Response:
    text = (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title>{head}</head><body><main id='app'></main>"
        f"<script>{script}</script></body></html>"
    )
    return web.Response(text=text, content_type="text/html")


def list_pages(items: int) -> int:
    return -(-items // LIST_PAGE)


def price(n: int) -> str:
    return f"{n * 3 + 0.99:.2f}"


async def index(request: web.Request) -> web.Response:
    return shell(
        "JavaScript shop",
        "const links = [1, 2, 3, 4, 5].map(n => `<li><a class='item' href='/js/item/${n}'>"
        "Item ${n}</a></li>`).join('');"
        "document.getElementById('app').innerHTML = `<h1>JavaScript shop</h1><ul>${links}</ul>"
        "<a href='/js/list'>All items</a> <a href='/js/data'>Data</a>`;",
    )


async def item(request: web.Request) -> web.Response:
    n = int(request.match_info["n"])
    if not 1 <= n <= request.app[ITEMS]:
        raise web.HTTPNotFound()
    return shell(
        f"Item {n}",
        f"document.getElementById('app').innerHTML = `<h1>Item {n}</h1>"
        f"<p class='price'>{price(n)}</p><a href='/js/'>Back</a>`;",
    )


async def endless_list(request: web.Request) -> web.Response:
    # ?slow=MS: the list's API answers that late (a slow server)
    slow = request.query.get("slow", "")
    delay = f"&delay={int(slow)}" if slow.isdigit() else ""
    return shell(
        "All items",
        "const app = document.getElementById('app');"
        "app.innerHTML = '<h1>All items</h1><ul id=\"items\"></ul>';"
        "let next = 0, loading = false;"
        "async function more() {"
        f"  if (loading || next >= {list_pages(request.app[ITEMS])}) return; loading = true;"
        f"  const answer = await fetch(`/js/api/list?page=${{next}}{delay}`);"
        "  const items = await answer.json(); next += 1;"
        "  document.getElementById('items').insertAdjacentHTML('beforeend', items.map(n =>"
        "    `<li style='height: 300px'><a class='item' href='/js/item/${n}'>Item ${n}</a></li>`"
        "  ).join(''));"
        "  loading = false;"
        "}"
        "window.addEventListener('scroll', () => {"
        "  if (window.innerHeight + window.scrollY >= document.body.scrollHeight - 10) more();"
        "});"
        "more();",
    )


async def list_api(request: web.Request) -> web.Response:
    try:
        page = int(request.query.get("page", "0"))
    except ValueError:
        raise web.HTTPBadRequest() from None
    items = request.app[ITEMS]
    if not 0 <= page < list_pages(items):
        return web.json_response([])
    delay = request.query.get("delay", "")
    if delay.isdigit():
        await asyncio.sleep(min(int(delay), 10_000) / 1000)
    last = min((page + 1) * LIST_PAGE, items)
    return web.json_response(list(range(page * LIST_PAGE + 1, last + 1)))


async def data(request: web.Request) -> web.Response:
    return shell(
        "Data",
        "fetch('/js/api/data.json').then(answer => answer.json()).then(rows => {"
        "  document.getElementById('app').innerHTML = '<h1>Data</h1><table>' + rows.map(row =>"
        "    `<tr class='row'><td>${row.name}</td><td class='price'>${row.price}</td></tr>`"
        "  ).join('') + '</table>';"
        "});",
    )


async def data_api(request: web.Request) -> web.Response:
    return web.json_response([{"name": f"Item {n}", "price": price(n)} for n in range(1, 6)])


async def hostile_index(request: web.Request) -> web.Response:
    links = "".join(
        f"<a href='/js/hostile/{name}'>{name}</a> " for name in HOSTILE
    )  # plain HTML: a person finds them
    return web.Response(text=f"<html><body>{links}</body></html>", content_type="text/html")


async def loop(request: web.Request) -> web.Response:
    return shell("Loop", "while (true) {}")


async def alloc(request: web.Request) -> web.Response:
    return shell("Alloc", "const hoard = []; while (true) { hoard.push(new Array(1e6).fill(1)); }")


async def popup(request: web.Request) -> web.Response:
    return shell(
        "Popup",
        "for (let i = 0; i < 5; i++) window.open('/js/item/' + (i + 1));"
        "document.getElementById('app').innerHTML = '<h1>Popup</h1>';",
    )


async def download(request: web.Request) -> web.Response:
    return web.Response(
        body=b"\0" * 1024,
        content_type="application/octet-stream",
        headers={"Content-Disposition": "attachment; filename=file.bin"},
    )


async def noload(request: web.Request) -> web.Response:
    return shell("No load", "", head="<script src='/js/hang'></script>")


async def hang(request: web.Request) -> web.Response:
    await asyncio.sleep(HANG_SECONDS)
    return web.Response(text="", content_type="application/javascript")


HOSTILE = {"loop": loop, "alloc": alloc, "popup": popup, "download": download, "noload": noload}


def add_routes(app: web.Application, items: int = JS_ITEMS) -> None:
    app[ITEMS] = items
    app.router.add_get("/js/", index)
    app.router.add_get(r"/js/item/{n:\d+}", item)
    app.router.add_get("/js/list", endless_list)
    app.router.add_get("/js/api/list", list_api)
    app.router.add_get("/js/data", data)
    app.router.add_get("/js/api/data.json", data_api)
    app.router.add_get("/js/hang", hang)
    app.router.add_get("/js/hostile/", hostile_index)
    for name, handler in HOSTILE.items():
        app.router.add_get(f"/js/hostile/{name}", handler)
