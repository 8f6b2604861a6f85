"""The shop's page: its title, its navigation, its body."""

from __future__ import annotations

import html

from aiohttp import web


def page(title: str, body: str) -> web.Response:
    text = (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title></head><body>"
        f"<nav><a href='/'>Home</a> <a href='/about'>About</a></nav>{body}</body></html>"
    )
    return web.Response(text=text, content_type="text/html")
