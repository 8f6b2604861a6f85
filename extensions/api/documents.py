"""A fetched page as a Firecrawl v2 document: the formats the call asked for
(``markdown``, ``html``, ``rawHtml``, ``links``) and its ``metadata``."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from extensions.documents.errors import NotADocument
from extensions.documents.extract import build_document, first

if TYPE_CHECKING:
    from scrapy.http import Response

#: the formats the cluster makes; others a call names are accepted and warned of
FORMATS = ("markdown", "html", "rawHtml", "links")
#: characters of a page's HTML a document holds at most
MAX_HTML = 5_000_000
#: links a document lists at most
MAX_LINKS = 5_000


def format_names(formats: Any) -> list[str]:
    """The names in a call's ``formats`` (a string each, or ``{"type": ...}``)."""
    names = []
    for entry in formats if isinstance(formats, list) else []:
        name = entry.get("type") if isinstance(entry, dict) else entry
        if isinstance(name, str):
            names.append(name)
    return names


def page_links(response: Response) -> list[str]:
    from scrapy.http import TextResponse
    from scrapy.linkextractors import LinkExtractor

    if not isinstance(response, TextResponse):
        return []
    try:
        links = LinkExtractor(deny_extensions=[]).extract_links(response)
    except (AttributeError, ValueError, TypeError):  # not HTML
        return []
    return list(dict.fromkeys(link.url for link in links))[:MAX_LINKS]


def _own_title(response: Response) -> str | None:
    from scrapy.http import TextResponse

    return first(response, "title::text") if isinstance(response, TextResponse) else None


def firecrawl_document(response: Response, options: dict[str, Any]) -> dict[str, Any]:
    formats = set(format_names(options.get("formats"))) or {"markdown"}
    only_main = options.get("onlyMainContent", True) is not False
    redirects = response.meta.get("redirect_urls") or []
    metadata: dict[str, Any] = {
        "sourceURL": redirects[0] if redirects else response.url,
        "url": response.url,
        "statusCode": response.status,
        "contentType": (response.headers.get("Content-Type") or b"").decode("latin-1"),
    }
    document: dict[str, Any] = {}
    try:
        built = build_document(response, main_content=only_main)
    except NotADocument as exc:
        built = None
        metadata["error"] = f"no document: {exc}"
    if built is not None:
        # the page's own <title>, as Firecrawl gives it; the extractor's guess without one
        title = _own_title(response) or built.get("title")
        metadata.update(title=title, description=built.get("description"),
                        language=built.get("lang"))  # fmt: skip
        if "markdown" in formats:
            document["markdown"] = built.get("markdown") or ""
    text = getattr(response, "text", None)
    if isinstance(text, str):
        if "html" in formats:
            document["html"] = text[:MAX_HTML]
        if "rawHtml" in formats:
            document["rawHtml"] = text[:MAX_HTML]
    if "links" in formats:
        document["links"] = page_links(response)
    document["metadata"] = {k: v for k, v in metadata.items() if v is not None}
    return document


#: a markdown link's target, as llms.txt lists its pages
MARKDOWN_LINK = re.compile(r"\]\((https?://[^)\s]+)\)")


def listed_links(response: Response) -> list[str]:
    """The URLs an ``/llms.txt`` lists (markdown links, absolute); [] for any
    other page."""
    if not response.url.split("?", 1)[0].endswith("/llms.txt"):
        return []
    text = getattr(response, "text", None)
    if not isinstance(text, str):
        text = response.body[:MAX_HTML].decode("utf-8", "replace")
    return list(dict.fromkeys(MARKDOWN_LINK.findall(text[:MAX_HTML])))[:MAX_LINKS]
