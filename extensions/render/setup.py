"""Whether this node renders, and the settings that make it a render node."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from extensions.meta import RENDER
from extensions.render.browser import find_browser

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.settings import BaseSettings

logger = logging.getLogger(__name__)

HANDLER = "extensions.render.handler.RenderDownloadHandler"


def renders_here(settings: BaseSettings) -> bool:
    """RENDER_ENABLED, and a browser to render with."""
    if not settings.getbool("RENDER_ENABLED"):
        return False
    return find_browser(settings.get("RENDER_BROWSER", "")) is not None


def install(settings: BaseSettings) -> None:
    """Make a node with RENDER_ENABLED a render node: the render handler for
    http and https (a project's own handler stays). Without a browser it stays
    a plain node, and says so."""
    if not settings.getbool("RENDER_ENABLED"):
        return
    if find_browser(settings.get("RENDER_BROWSER", "")) is None:
        logger.error(
            "RENDER_ENABLED, but no browser was found (RENDER_BROWSER=%r; install "
            "Debian's chromium): this node fetches no render request",
            settings.get("RENDER_BROWSER", ""),
        )
        return
    handlers = settings["DOWNLOAD_HANDLERS"]
    for scheme in ("http", "https"):
        if handlers.get(scheme) in (None, "") and scheme not in handlers:
            handlers[scheme] = HANDLER


def render_room(held: Iterable[Request], pages: int) -> int:
    """Render requests a node may lease now: two for each page it may have open
    (``pages``; 0 on a node that cannot render), less the ones it holds."""
    if not pages:
        return 0
    holding = sum(1 for request in held if request.meta.get(RENDER) is True)
    return max(0, 2 * pages - holding)
