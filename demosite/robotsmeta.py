"""``/robots-meta/``: pages that say what a crawler may do with them (never
linked from the shop). The index links to one page per way of saying it; each
of those links to a page of its own, ``/robots-meta/from/NAME``, which a
crawler that honours the page does or does not fetch:

* ``noindex``: ``<meta name="robots" content="noindex">`` (links followed);
* ``nofollow``: ``<META NAME="Robots" CONTENT=" NoFollow ">`` (odd case and
  spacing; no link followed);
* ``none-header``: ``X-Robots-Tag: none`` (neither);
* ``other-agent``: ``X-Robots-Tag: otherbot: noindex, nofollow`` (another
  crawler's: everything as usual);
* ``own-agent``: ``X-Robots-Tag: otherbot: noindex, crawler: nofollow`` (the
  demo project's own token: no link followed);
* ``own-meta``: ``<meta name="robots" content="all">`` and ``<meta
  name="crawler" content="noindex">`` (the most restrictive wins);
* ``rel``: its link has ``rel="nofollow"`` (followed unless a crawler is told
  not to); its ``Content-Usage: train-ai=n`` header says how it may be used.

The index links to ``/robots-meta/paid`` too, which answers ``402 Payment
Required`` with the price in a ``crawler-price`` header, as pay-per-crawl
sites do.
"""

from __future__ import annotations

from aiohttp import web

OWN_META = '<meta name="robots" content="all"><meta name="crawler" content="noindex">'
PAGES = {  # name -> (head, X-Robots-Tag, rel of its link)
    "noindex": ('<meta name="robots" content="noindex">', None, ""),
    "nofollow": ('<META NAME="Robots" CONTENT=" NoFollow ">', None, ""),
    "none-header": ("", "none", ""),
    "other-agent": ("", "otherbot: noindex, nofollow", ""),
    "own-agent": ("", "otherbot: noindex, crawler: nofollow", ""),
    "own-meta": (OWN_META, None, ""),
    "rel": ("", None, ' rel="nofollow"'),
}
#: what a crawler honouring them stores and fetches, with the defaults
NOINDEX = {"noindex", "none-header", "own-meta"}
NOFOLLOW = {"nofollow", "none-header", "own-agent"}


def _page(title: str, head: str, body: str, robots: str | None = None) -> web.Response:
    text = f"<!DOCTYPE html><html><head><title>{title}</title>{head}</head>"
    text += f"<body>{body}</body></html>"
    headers = {"X-Robots-Tag": robots} if robots else None
    return web.Response(text=text, content_type="text/html", headers=headers)


PRICE = "USD 0.01"
#: what a host named signals.* says its content may be used for, in its robots.txt:
#: Content-Signal for the whole site, the IETF draft's Content-Usage rules by path
CONTENT_SIGNALS = (
    "Content-Signal: search=yes, ai-input=no\n"
    "Content-Usage: train-ai=n\n"
    "Content-Usage: /robots-meta/from/ train-ai=y, train-genai=n\n"
    "Content-Usage: /robots-meta/from/rel train-ai=y\n"
)
PAGE_USAGE = 'train-ai=n;reason="ours alone", search=n'


async def index(request: web.Request) -> web.Response:
    links = "".join(f'<a href="/robots-meta/{name}">{name}</a> ' for name in PAGES)
    return _page("Robots meta", "", links + '<a href="/robots-meta/paid">paid</a>')


async def paid(request: web.Request) -> web.Response:
    headers = {"crawler-price": PRICE, "Link": '<https://example.com/terms>; rel="terms"'}
    return web.Response(status=402, text="Payment Required", headers=headers)


async def directive(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    if name not in PAGES:
        raise web.HTTPNotFound()
    head, header, rel = PAGES[name]
    link = f'<a href="/robots-meta/from/{name}"{rel}>more</a>'
    response = _page(f"Says {name}", head, link, header)
    if name == "rel":  # a page that says more of its use than its site's robots.txt
        response.headers["Content-Usage"] = PAGE_USAGE
    return response


async def leaf(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    if name not in PAGES:
        raise web.HTTPNotFound()
    return _page(f"From {name}", "", "<p>a page of its own</p>")


def add_routes(app: web.Application) -> None:
    app.router.add_get("/robots-meta/", index)
    app.router.add_get("/robots-meta/paid", paid)
    app.router.add_get("/robots-meta/from/{name}", leaf)
    app.router.add_get("/robots-meta/{name}", directive)
