"""What the add-on installs for the wire (``declared.py``): certificates verified
unless the project says otherwise, and the HTTPS handler (``handlers.py``)
unless the project, or a render node, has its own."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.settings import SETTINGS_PRIORITIES

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

HTTP11 = "extensions.wire.handlers.Http11Handler"
HTTP2 = "extensions.wire.http2.Http2Handler"


def install(settings: BaseSettings) -> None:
    if (settings.getpriority("DOWNLOAD_VERIFY_CERTIFICATES") or 0) <= SETTINGS_PRIORITIES["addon"]:
        settings.set("DOWNLOAD_VERIFY_CERTIFICATES", True, "addon")  # Scrapy's is off
    handlers = settings["DOWNLOAD_HANDLERS"]
    # (a scheme there already: the project's own handler, a render node's, or
    # None, refused by ALLOWED_SCHEMES)
    if "https" not in handlers:
        handlers["https"] = HTTP2 if settings.getbool("HTTP2_ENABLED") else HTTP11
