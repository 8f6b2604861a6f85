"""Serve the demo shop on 127.0.0.1.

    python -m demosite.server --port 8000

``--port 0`` takes a free port; the first line printed is ``listening on URL``.
``GET /__hits`` returns how often each path was requested (the access log as
JSON), which the tests use to prove every page was fetched exactly once;
``GET /__times`` when (seconds since epoch) each path was requested;
``GET /__agents`` the User-Agent headers each path was requested with;
``GET /__host_times`` when and what each Host header asked for (a shared host).
``/js/`` (not linked) holds pages JavaScript builds (``--js-items`` items), and
``/js/hostile/`` pages that attack a browser (``demosite/jspages.py``).

``/flaky/`` (not linked from the shop) lists pages that fail on purpose:
``/flaky/503-twice/N`` (503, 503, then the page), ``/flaky/429/N`` (429 with
``Retry-After: 2`` once, then the page), ``/flaky/500/N`` (always 500) and
``/flaky/timeout-once/N`` (the first answer takes 10 s, then the page).
``/hostile/`` (not linked either) attacks the crawler: links to local files
and other schemes, redirects there, a huge response, a page with 300,000
links (``demosite/hostile.py``). ``/trap/`` (not linked either) leads into
traps: an endless calendar, a looping path, endless filters (``demosite/traps.py``).
``/changing/`` (not linked) lists pages whose content changes every
CHANGE_EVERY requests, with ETag and Last-Modified, answering 304 to a
conditional request that matches (``GET /__not_modified`` counts those;
``demosite/flaky.py`` holds these and the ``/flaky/`` pages); the
shop's own pages carry an ETag of their body and answer 304 the same way.
``/sitemap.xml`` (named in robots.txt) is a sitemap index of
``/sitemap-categories.xml`` and one ``/sitemap-products-CATEGORY.xml`` per category,
each URL with a lastmod (``POST /__edit?path=/product/N`` sets a product's to now).
``/sitemap-archive.xml`` (in no index) lists ``/archive/1`` to ``/archive/30``, pages
no page links to. ``/directory/`` (not linked) is a web directory laid out as DMOZ's
was, for scrapy-redis's example project (``demosite/directory.py``). ``/wide/`` (not
linked) has 1,000 pages of ten new links each, numbered breadth first (``demosite/wide.py``).
``/variants/`` (not linked) has pages each linked under many URLs: tracking parameters,
session ids, query orders, fragments (``demosite/variants.py``).

``/robots-meta/`` (not linked) has pages that say, in a meta tag or an
``X-Robots-Tag`` header, not to index them or follow their links
(``demosite/robotsmeta.py``); ``/md/`` markdown to a client that asks (``markdownpages.py``).
``POST /__down?path=P`` makes page P answer 503 until ``POST /__down?path=P&up=1``.
``--latency S`` delays every answer by S seconds, to slow a crawl down;
Under a name that starts with ``signals.``, robots.txt says what the site's
content may be used for (``Content-Signal``).
``--crawl-delay S`` adds ``Crawl-delay: S`` to robots.txt; ``--pushback MODE``
makes the host push back when crawled too fast (503, 429 + Retry-After, or a
captcha page: ``demosite/pushback.py``); ``--host 127.0.0.N`` serves another
loopback address, a host of its own; ``--categories N`` the first N categories.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import hashlib
import html
import signal
import sys
import time
from collections import Counter, defaultdict

from aiohttp import web

from demosite import (
    catalog,
    directory,
    flaky,
    hostile,
    jspages,
    markdownpages,
    pushback,
    robotsmeta,
    sections,
    traps,
    variants,
    wide,
)
from demosite.layout import page

ROBOTS = "User-agent: *\nDisallow: /private/\n"


async def home(request: web.Request) -> web.Response:
    links = "".join(
        f"<li><a class='category' href='/category/{c}'>{c.title()}</a></li>"
        for c in request.app["categories"]
    )
    return page(
        "Demo Shop",
        f"<h1>Demo Shop</h1><ul>{links}</ul>"
        "<a href='/private/admin'>Staff only</a> "
        "<a href='http://external.invalid/'>Elsewhere</a>",
    )


async def about(request: web.Request) -> web.Response:
    return page("About the Demo Shop", "<h1>About</h1><p>A shop that never changes.</p>")


async def category(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    if name not in request.app["categories"]:
        raise web.HTTPNotFound()
    try:
        number = int(request.query.get("page", "1"))
    except ValueError:
        raise web.HTTPNotFound() from None
    pages = catalog.pages_in(name)
    if not 1 <= number <= pages:
        raise web.HTTPNotFound()
    first = (number - 1) * catalog.PER_PAGE
    ids = catalog.product_ids(name)[first : first + catalog.PER_PAGE]
    names = {i: html.escape(catalog.product(i).name) for i in ids}
    items = "".join(
        f"<li class='product'><a href='/product/{i}'>{name}</a></li>" for i, name in names.items()
    )

    def href(n: int) -> str:
        return f"/category/{name}" if n == 1 else f"/category/{name}?page={n}"

    nav = " ".join(f"<a class='page' href='{href(n)}'>{n}</a>" for n in range(1, pages + 1))
    if number < pages:
        nav += f" <a rel='next' class='next' href='{href(number + 1)}'>Next</a>"
    return page(
        f"{name.title()} - page {number}",
        f"<h1>{name.title()}</h1><ul class='products'>{items}</ul><div class='pager'>{nav}</div>",
    )


async def product(request: web.Request) -> web.Response:
    try:
        item = catalog.product(int(request.match_info["id"]))
    except ValueError:
        item = None
    if item is None or item.category not in request.app["categories"]:
        raise web.HTTPNotFound()
    related = "".join(f"<li><a href='/product/{r}'>Product {r}</a></li>" for r in item.related)
    stock = "in stock" if item.in_stock else "out of stock"
    return page(
        item.name,
        f"<div class='product' data-id='{item.id}'>"
        f"<h1 class='name'>{html.escape(item.name)}</h1>"
        f"<span class='sku'>{item.sku}</span>"
        f"<span class='price' data-currency='EUR'>{item.price_cents / 100:.2f}</span>"
        f"<span class='rating'>{item.rating}</span>"
        f"<span class='stock'>{stock}</span>"
        f"<a class='category' href='/category/{item.category}'>{item.category}</a>"
        f"</div><h2>Related</h2><ul class='related'>{related}</ul>",
    )


async def robots(request: web.Request) -> web.Response:
    delay = request.app["crawl_delay"]
    text = ROBOTS + (f"Crawl-delay: {delay}\n" if delay else "")
    if request.host.startswith("signals."):
        text += robotsmeta.CONTENT_SIGNALS
    text += f"Sitemap: {_origin(request)}/sitemap.xml\n"
    return web.Response(text=text, content_type="text/plain")


def _origin(request: web.Request) -> str:
    return f"{request.scheme}://{request.host}"


def _xml(body: str) -> web.Response:
    text = f'<?xml version="1.0" encoding="UTF-8"?>\n{body}'
    return web.Response(text=text, content_type="application/xml")


SITEMAP_NS = "http://www.sitemaps.org/schemas/sitemap/0.9"


async def sitemap_index(request: web.Request) -> web.Response:
    """A sitemap index (named in robots.txt): the categories, and the products
    of each category in a sitemap of their own."""
    origin = _origin(request)
    parts = ["categories"] + [f"products-{c}" for c in request.app["categories"]]
    entries = "".join(f"<sitemap><loc>{origin}/sitemap-{p}.xml</loc></sitemap>" for p in parts)
    return _xml(f'<sitemapindex xmlns="{SITEMAP_NS}">{entries}</sitemapindex>')


async def sitemap(request: web.Request) -> web.Response:
    """Every category's first page, or one category's products, each with a lastmod."""
    origin = _origin(request)
    part = request.match_info["part"]
    category = part.removeprefix("products-")
    if part == "categories":
        paths = [(f"/category/{c}", "2026-11-01") for c in request.app["categories"]]
    elif part == "archive":
        paths = [(f"/archive/{n}", "2025-06-01") for n in range(1, ARCHIVE_PAGES + 1)]
    elif category in request.app["categories"]:
        edited = request.app["edited"]
        paths = [
            (f"/product/{i}", edited.get(f"/product/{i}", f"2026-11-{1 + i % 28:02d}"))
            for i in catalog.product_ids(category)
        ]
    else:
        raise web.HTTPNotFound()
    urls = "".join(
        f"<url><loc>{origin}{path}</loc><lastmod>{lastmod}</lastmod></url>"
        for path, lastmod in paths
    )
    return _xml(f'<urlset xmlns="{SITEMAP_NS}">{urls}</urlset>')


ARCHIVE_PAGES = 30


async def archive(request: web.Request) -> web.Response:
    """An old notice no page links to: only ``/sitemap-archive.xml`` lists it."""
    n = int(request.match_info["n"])
    if not 1 <= n <= ARCHIVE_PAGES:
        raise web.HTTPNotFound()
    text = (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>Archived notice {n}</title></head><body><p>Notice {n}, kept for the "
        "record.</p></body></html>"
    )
    return web.Response(text=text, content_type="text/html")


async def private(request: web.Request) -> web.Response:
    return page("Private", "<p>Crawlers that obey robots.txt never see this.</p>")


async def edit(request: web.Request) -> web.Response:
    """``POST /__edit?path=/product/5``: the product's sitemap entry gets a lastmod
    of now, as a shop's would after an edit."""
    path = request.query.get("path", "")
    if not path.startswith("/product/"):
        raise web.HTTPBadRequest(text="path must be a product page")
    request.app["edited"][path] = dt.datetime.now(dt.UTC).isoformat()
    return web.json_response(request.app["edited"])


async def not_modified(request: web.Request) -> web.Response:
    return web.json_response(dict(request.app["not_modified"]))


async def hits(request: web.Request) -> web.Response:
    return web.json_response(dict(request.app["hits"]))


async def times(request: web.Request) -> web.Response:
    return web.json_response(request.app["times"])


async def host_times(request: web.Request) -> web.Response:
    return web.json_response(request.app["host_times"])


async def agents(request: web.Request) -> web.Response:
    return web.json_response({path: sorted(seen) for path, seen in request.app["agents"].items()})


@web.middleware
async def count_hits(request: web.Request, handler):
    if not request.path.startswith("/__"):
        request.app["hits"][request.path_qs] += 1
        request.app["times"][request.path_qs].append(time.time())
        request.app["host_times"][request.host].append((time.time(), request.path_qs))
        request.app["agents"][request.path_qs].add(request.headers.get("User-Agent", ""))
        if request.app["latency"]:
            await asyncio.sleep(request.app["latency"])
        if request.path in request.app["down"]:
            return web.Response(status=503, text="down for maintenance")
    return await handler(request)


async def down(request: web.Request) -> web.Response:
    """``POST /__down?path=/changing/2`` answers 503 there until ``&up=1``."""
    path = request.query.get("path", "")
    if request.query.get("up"):
        request.app["down"].discard(path)
    else:
        request.app["down"].add(path)
    return web.json_response(sorted(request.app["down"]))


SHOP_PAGES = ("/category/", "/product/")  # static: an ETag each, 304 when it matches


@web.middleware
async def shop_etags(request: web.Request, handler):
    """The shop's pages never change: each gets an ETag from its body, and a
    request that has it gets a 304, as from a web server serving files."""
    response = await handler(request)
    if request.path != "/" and not request.path.startswith(SHOP_PAGES):
        return response
    if not isinstance(response, web.Response) or response.status != 200 or not response.body:
        return response
    etag = '"' + hashlib.sha1(response.body).hexdigest()[:16] + '"'  # type: ignore[arg-type]
    if request.headers.get("If-None-Match") == etag:
        request.app["not_modified"][request.path_qs] += 1
        return web.Response(status=304, headers={"ETag": etag})
    response.headers["ETag"] = etag
    return response


def make_app(latency: float = 0.0, crawl_delay: float = 0.0, pushback_mode: str = "",
             categories: int = 0, js_items: int = jspages.JS_ITEMS) -> web.Application:  # fmt: skip
    """``categories``: a shop of the first that many categories (0: all);
    ``js_items``: how many items the JavaScript pages have."""
    app = web.Application(middlewares=[count_hits, shop_etags])
    app["categories"] = catalog.CATEGORIES[: categories or None]
    if pushback_mode:
        pushback.install(app, pushback_mode)
    app["crawl_delay"] = crawl_delay
    app["hits"] = Counter()
    app["not_modified"] = Counter()
    app["edited"] = {}
    app["down"] = set()
    app["times"] = defaultdict(list)
    app["agents"] = defaultdict(set)
    app["host_times"] = defaultdict(list)
    app["latency"] = latency
    app.router.add_get("/", home)
    app.router.add_get("/about", about)
    app.router.add_get("/category/{name}", category)
    app.router.add_get("/product/{id}", product)
    app.router.add_get("/robots.txt", robots)
    app.router.add_get("/sitemap.xml", sitemap_index)
    app.router.add_get("/sitemap-{part}.xml", sitemap)
    app.router.add_get(r"/archive/{n:\d+}", archive)
    app.router.add_get("/private/{rest:.*}", private)
    flaky.add_routes(app)
    hostile.add_routes(app)
    traps.add_routes(app)
    directory.add_routes(app)
    wide.add_routes(app)
    variants.add_routes(app)
    robotsmeta.add_routes(app)
    markdownpages.add_routes(app)
    jspages.add_routes(app, js_items)
    sections.add_routes(app)
    app.router.add_get("/__not_modified", not_modified)
    app.router.add_post("/__edit", edit)
    app.router.add_post("/__down", down)
    app.router.add_get("/__hits", hits)
    app.router.add_get("/__times", times)
    app.router.add_get("/__agents", agents)
    app.router.add_get("/__host_times", host_times)
    return app


async def serve(host: str, port: int, app: web.Application) -> None:
    # a page held open on purpose (/js/hang) must not hold the site's exit for a minute
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = site._server.sockets[0].getsockname()[1]  # the real port when 0 was asked
    print(f"listening on http://{host}:{bound}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await runner.cleanup()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added to each answer")
    parser.add_argument(
        "--crawl-delay", type=float, default=0.0, help="a Crawl-delay line in robots.txt"
    )
    parser.add_argument(
        "--categories", type=int, default=0, help="a shop of the first N categories (0: all)"
    )
    parser.add_argument("--js-items", type=int, default=jspages.JS_ITEMS, help="/js/ items")
    parser.add_argument(
        "--pushback", default="", help="overload:RATE, throttle:RATE:SECONDS or ban:RATE:SECONDS"
    )
    args = parser.parse_args(argv)
    if args.categories < 0:
        parser.error(f"--categories: a number of categories, 0 for all (not {args.categories})")
    if args.js_items < 1:
        parser.error(f"--js-items: 1 or more (not {args.js_items})")
    if args.pushback:
        try:
            pushback.Pushback(args.pushback)
        except ValueError as exc:
            parser.error(str(exc))
    try:
        shop = (args.latency, args.crawl_delay, args.pushback, args.categories, args.js_items)
        app = make_app(*shop)
        asyncio.run(serve(args.host, args.port, app))
    except OSError as exc:
        sys.exit(f"demo site: cannot listen on {args.host}:{args.port}: {exc}")


if __name__ == "__main__":
    main()
