"""An HTML page to a document: its main content as markdown and text, its
metadata, structured data and chunks.

The main content and the markdown are trafilatura's (maintained, the
extractor that leads the published boilerplate-removal benchmarks, and one
that writes markdown with headings, lists, tables, links and code kept); with
``DOCUMENTS_MAIN_CONTENT = False`` the whole page is markdown by markdownify; its
metadata reader gives the title, description and the dates the page states
(htmldate). The language is py3langid's reading of the text (a page's own
``lang`` attribute is often a template's default), the page's attribute when
the text is too short to tell. JSON-LD is the page's own
``<script type="application/ld+json">``, parsed, never run.
"""

from __future__ import annotations

import functools
import json
import logging
from typing import TYPE_CHECKING, Any

from extensions.documents.binary import binary_document, sniff
from extensions.documents.chunks import chunk, estimate_tokens
from extensions.documents.errors import NotADocument
from extensions.pipelines.documents import document_problem

if TYPE_CHECKING:
    from scrapy.http import Response

logger = logging.getLogger(__name__)

MAX_BYTES = 5_000_000  # a page's first bytes extraction reads: a huge page costs no more
MAX_JSON_LD = 20  # JSON-LD blocks a document keeps, each at most MAX_JSON_LD_BYTES
MAX_JSON_LD_BYTES = 100_000
LANGUAGE_MIN_CHARS = 40  # shorter text: the page's own lang attribute says
# trafilatura's text below which it adds what its fallback finds: at its 250
# characters a short article (three paragraphs of Japanese) came out twice
MIN_EXTRACTED_CHARS = 100


#: elements whose content is no part of what a reader sees on the page
NOT_SHOWN = ("script", "style", "noscript", "template", "svg", "iframe", "head")


def whole_page_markdown(html: str) -> str:
    """The whole page's body as markdown (DOCUMENTS_MAIN_CONTENT = False): every
    heading, list, table and link, menus and footers too, by markdownify."""
    from bs4 import BeautifulSoup
    from markdownify import MarkdownConverter

    soup = BeautifulSoup(html, "lxml")
    for element in soup(NOT_SHOWN):
        element.decompose()
    converter = MarkdownConverter(heading_style="ATX", bullets="-", strip=["img"])
    markdown = converter.convert_soup(soup.body or soup)
    lines = [line.rstrip() for line in markdown.splitlines()]
    return "\n".join(lines).replace("\n\n\n", "\n\n").strip()


@functools.cache
def _config() -> Any:
    from trafilatura.settings import use_config

    config = use_config()
    config.set("DEFAULT", "MIN_EXTRACTED_SIZE", str(MIN_EXTRACTED_CHARS))
    return config


def build_document(
    response: Response, *, main_content: bool = True, chunk_size: int = 0, chunk_overlap: int = 0
) -> dict[str, Any]:
    """The document of an HTML ``response``; raises NotADocument."""
    import trafilatura

    kind = (response.headers.get(b"Content-Type") or b"").split(b";")[0].strip().lower()
    binary = sniff(response.body)
    if binary:  # a PDF or a DOCX, whatever its Content-Type said
        return from_binary(response, binary, chunk_size, chunk_overlap)
    if getattr(response, "text", None) is None:
        raise NotADocument("binary_type")
    if kind == b"text/markdown":
        return served_markdown(response, chunk_size, chunk_overlap)
    if kind and kind not in (b"text/html", b"application/xhtml+xml"):
        raise NotADocument("not_html")
    html = response.text[:MAX_BYTES]
    if not html.strip():
        raise NotADocument("empty")
    url = response.url
    try:
        tree = trafilatura.load_html(html)
    except ValueError:
        tree = None
    if tree is None:
        raise NotADocument("unreadable")
    if main_content:
        # one extraction, its metadata with it; the markdown and the text are
        # two renderings of the one tree it found (as trafilatura's extract()
        # renders it), not two extractions
        from trafilatura.xml import xmltotxt

        meta = trafilatura.bare_extraction(
            tree, url=url, with_metadata=True, output_format="markdown", include_links=True,
            include_tables=True, include_formatting=True, include_comments=False,
            config=_config(),
        )  # fmt: skip
        body = getattr(meta, "body", None)
        markdown = xmltotxt(body, True).strip() if body is not None else ""
        text = xmltotxt(body, False).strip() if body is not None else ""
    else:
        text = trafilatura.html2txt(html) or ""
        markdown = whole_page_markdown(html)
        meta = trafilatura.extract_metadata(tree, default_url=url)
    json_ld = structured_data(response)
    document = {
        "url": url,
        "canonical": canonical(response),
        "title": getattr(meta, "title", None) or first(response, "title::text"),
        "description": getattr(meta, "description", None) or None,
        "lang": language(text, response),
        "published": getattr(meta, "date", None) or dated(json_ld, "datePublished"),
        "modified": dated(json_ld, "dateModified")
        or first(response, 'meta[property="article:modified_time"]::attr(content)'),
        "markdown": markdown,
        "text": text,
        "json_ld": json_ld,
        "tokens": estimate_tokens(markdown),
    }
    if chunk_size > 0:
        document["chunks"] = chunk(markdown, url, chunk_size, chunk_overlap)
    return document


def first(response: Response, css: str) -> str | None:
    found = (response.css(css).get() or "").strip()
    return found[:2000] or None


def canonical(response: Response) -> str | None:
    href = first(response, 'link[rel="canonical"]::attr(href)')
    return response.urljoin(href) if href else None


def language(text: str, response: Response | None) -> str | None:
    """The text's language (ISO 639-1), or the page's ``lang`` attribute's."""
    if len(text) >= LANGUAGE_MIN_CHARS:
        import py3langid

        code, _ = py3langid.classify(text[:20_000])
        return str(code)
    if response is None or not hasattr(response, "xpath"):
        return None
    declared = (response.xpath("/html/@lang").get() or "").strip().lower()
    return declared.split("-")[0][:8] or None


def structured_data(response: Response) -> list[Any]:
    """The page's JSON-LD blocks that parse (others are skipped, never run)."""
    found: list[Any] = []
    for raw in response.css('script[type="application/ld+json"]::text').getall()[:MAX_JSON_LD]:
        if len(raw) > MAX_JSON_LD_BYTES:
            continue
        try:
            block = json.loads(raw)
        except (ValueError, RecursionError):
            continue
        # a block MongoDB would reinterpret or refuse (a '.' or '$' name, nested
        # past its limit) is left out, never the whole document with it
        if document_problem({"json_ld": [block]}) is None:
            found.append(block)
    return found


def dated(json_ld: list[Any], field: str) -> str | None:
    """A date field of the first JSON-LD object that has one."""
    stack = list(json_ld)
    while stack:
        item = stack.pop(0)
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            value = item.get(field)
            if isinstance(value, str) and value:
                return value[:64]
            stack.extend(v for v in item.values() if isinstance(v, dict | list))
    return None


def served_markdown(response: Response, chunk_size: int, chunk_overlap: int) -> dict[str, Any]:
    """A page the site served as markdown (``Accept: text/markdown``): kept as
    served; its title its first heading; its token count the site's own
    (``x-markdown-tokens``) when it is a number; its ``Content-Signal`` noted."""
    markdown = response.text[:MAX_BYTES]
    if not markdown.strip():
        raise NotADocument("empty")
    url = response.url
    title = next((line.lstrip("#").strip() for line in markdown.splitlines()
                  if line.startswith("# ")), None)  # fmt: skip
    served_tokens = (response.headers.get(b"x-markdown-tokens") or b"").strip()
    signal = (response.headers.get(b"Content-Signal") or b"").decode("latin-1")[:500]
    document: dict[str, Any] = {
        "url": url,
        "canonical": None,
        "title": title[:2000] if title else None,
        "description": None,
        "lang": language(markdown, response),
        "published": None,
        "modified": None,
        "markdown": markdown,
        "text": markdown,
        "json_ld": [],
        "tokens": int(served_tokens)
        if served_tokens.isdigit() and len(served_tokens) <= 12
        else estimate_tokens(markdown),
        "served_as": "markdown",
        "content_signal": signal or None,
    }
    if chunk_size > 0:
        document["chunks"] = chunk(markdown, url, chunk_size, chunk_overlap)
    return document


def from_binary(response: Response, kind: str, chunk_size: int, chunk_overlap: int) -> dict:
    """A PDF's or a DOCX's document (``binary.py``)."""
    found = binary_document(kind, response.body)
    text = found["text"]
    document: dict[str, Any] = {
        "url": response.url, "canonical": None, "title": found["title"], "description": None,
        "lang": language(text, None), "published": None, "modified": None,
        "markdown": found["markdown"], "text": text, "json_ld": [],
        "tokens": estimate_tokens(found["markdown"]), "served_as": found["served_as"],
    }  # fmt: skip
    if chunk_size > 0:
        document["chunks"] = chunk(found["markdown"], response.url, chunk_size, chunk_overlap)
    return document
