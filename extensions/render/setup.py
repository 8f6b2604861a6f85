"""Whether this node renders, and the settings that make it a render node."""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable
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
        if scheme not in handlers:
            handlers[scheme] = HANDLER
        elif handlers[scheme] != HANDLER:
            logger.warning(
                "RENDER_ENABLED, but DOWNLOAD_HANDLERS[%r] is the project's own (%s): "
                "it fetches this node's render requests",
                scheme,
                handlers[scheme],
            )


class RenderRoom:
    """How many render requests a node may lease now: two for each page it may
    have open (``pages``; 0 on a node that cannot render), less those it holds
    whose download has not ended (one whose page is parsed, or whose items are
    being stored, holds no browser page). When one ends, ``freed`` is called:
    the node looks for more at once rather than after its idle back-off."""

    def __init__(self, pages: int, freed: Callable[[], object] = lambda: None):
        self.pages = pages
        self.freed = freed
        self._held: weakref.WeakSet[Request] = weakref.WeakSet()

    def took(self, request: Request) -> None:
        if self.pages and request.meta.get(RENDER) is True:
            self._held.add(request)

    def left(self, request: Request, spider: object = None) -> None:
        """Its download ended (request_left_downloader), or it finished without one."""
        if request in self._held:
            self._held.discard(request)
            self.freed()

    def room(self) -> int:
        return max(0, 2 * self.pages - len(self._held)) if self.pages else 0
