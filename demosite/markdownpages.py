"""``/md/``: pages served as markdown to a client that asks for it
(``Accept: text/markdown``), as HTML to the others, as sites now do for agents
(never linked from the shop). ``/md/article`` answers markdown with an
``x-markdown-tokens`` count and a ``Content-Signal``; ``/md/html-only`` always
answers HTML."""

from __future__ import annotations

import html

from aiohttp import web

MARKDOWN = """# Tides of the North Sea

The tide rises and falls twice a day along the coast, and the harbour master
publishes the times a week ahead.

## Spring tides

When the sun and the moon pull together, the tides run highest: see the
[tide tables](/md/html-only) for this month.

- high water: 06:12
- low water: 12:31
"""
TOKENS = "61"
SIGNAL = "search=yes, ai-input=yes, ai-train=no"


def _html(title: str, body: str) -> str:
    head = f"<!DOCTYPE html><html lang='en'><head><title>{title}</title></head>"
    return f"{head}<body>{body}</body></html>"


async def index(request: web.Request) -> web.Response:
    links = "<p><a href='/md/article'>article</a> <a href='/md/html-only'>tables</a></p>"
    return web.Response(text=_html("Markdown pages", links), content_type="text/html")


async def article(request: web.Request) -> web.Response:
    if "text/markdown" in request.headers.get("Accept", ""):
        return web.Response(body=MARKDOWN.encode(), content_type="text/markdown",
                            charset="utf-8", headers={"x-markdown-tokens": TOKENS,
                                                      "Content-Signal": SIGNAL})  # fmt: skip
    paragraphs = [p for p in MARKDOWN.split("\n\n") if not p.startswith("#")]
    body = "<article><h1>Tides of the North Sea</h1>"
    body += "".join(f"<p>{html.escape(p)}</p>" for p in paragraphs) + "</article>"
    return web.Response(text=_html("Tides", body), content_type="text/html")


async def html_only(request: web.Request) -> web.Response:
    body = "<article><h1>Tide tables</h1><p>" + "High water at dawn, low water at noon. " * 8
    return web.Response(text=_html("Tide tables", body + "</p></article>"),
                        content_type="text/html")  # fmt: skip


def add_routes(app: web.Application) -> None:
    app.router.add_get("/md/", index)
    app.router.add_get("/md/article", article)
    app.router.add_get("/md/html-only", html_only)
