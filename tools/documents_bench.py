"""``make bench`` section 33: documents for search and language models.

* In one process, on Python's documentation (Debian's python3-doc, its HTML
  pages): CPU per page of ``build_document`` (extensions/documents/extract.py)
  against the same libraries called alone on the same pages, the way a user
  would call them (trafilatura's one extraction with its metadata, rendered as
  markdown and as text, py3langid on the text): the overhead of our path over
  the libraries.
* Bytes per document (its JSON), with chunks of 500 tokens and without.
* A crawl of the docs whole from Debian's nginx by the ``site`` spider, one
  node, with ``DOCUMENTS_ENABLED`` and without: the node's own CPU per page.
Skipped without python3-doc or nginx (``make system-tools`` installs them).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from servers.nginx import PYTHON_DOCS, docs_server_missing, start_tls_nginx
from tools.wire_bench import crawl

HOST = "127.0.0.48"
PAGES = 300  # the in-process part's pages (the first, sorted by path)


def pages() -> list[tuple[str, str]]:
    found = sorted(PYTHON_DOCS.rglob("*.html"))[:PAGES]
    return [(f"http://docs.test/{p.relative_to(PYTHON_DOCS)}", p.read_text(errors="replace"))
            for p in found]  # fmt: skip


def libraries_alone(html: str, url: str) -> None:
    """The same work with the libraries alone, the least a user could write: one
    extraction with its metadata, its markdown and its text, the language."""
    import py3langid
    import trafilatura
    from trafilatura.xml import xmltotxt

    found = trafilatura.bare_extraction(
        html, url=url, with_metadata=True, output_format="markdown", include_links=True,
        include_tables=True, include_formatting=True,
    )  # fmt: skip
    body = getattr(found, "body", None)
    if body is not None:
        xmltotxt(body, True)
        py3langid.classify(xmltotxt(body, False)[:20_000])


def in_process() -> dict:
    from scrapy.http import HtmlResponse, Request

    from extensions.documents.extract import build_document

    docs = pages()
    libraries_alone(docs[0][1], docs[0][0])  # (the models loaded before the clock starts)
    build_document(HtmlResponse(docs[0][0], body=docs[0][1].encode(), encoding="utf-8"))
    began = time.process_time()
    for url, html in docs:
        libraries_alone(html, url)
    alone = time.process_time() - began
    began = time.process_time()
    sizes, chunked = [], []
    for url, html in docs:
        response = HtmlResponse(url, body=html.encode(), encoding="utf-8", request=Request(url))
        sizes.append(len(json.dumps(build_document(response)).encode()))
    ours = time.process_time() - began
    for url, html in docs[:50]:
        response = HtmlResponse(url, body=html.encode(), encoding="utf-8", request=Request(url))
        chunked.append(len(json.dumps(build_document(response, chunk_size=500)).encode()))
    return {"pages": len(docs), "alone": alone, "ours": ours,
            "bytes": sum(sizes) / len(sizes), "bytes_chunked": sum(chunked) / len(chunked),
            "bytes_unchunked": sum(sizes[: len(chunked)]) / len(chunked),
            "html_bytes": sum(len(h.encode()) for _, h in docs) / len(docs)}  # fmt: skip


def measure(redis_url: str, work: Path) -> dict:
    if missing := docs_server_missing():
        return {"skipped": missing}
    work.mkdir(parents=True, exist_ok=True)
    result: dict = {"in_process": in_process(), "crawl": {}}
    server = start_tls_nginx(work / "nginx", PYTHON_DOCS, {"docs": None}, host=HOST, tls=False)
    try:
        for on in (False, True):
            result["crawl"][on] = crawl("site", redis_url, [server.url + "/index.html"],
                                         work / "run", 1, {},
                                         {"DOCUMENTS_ENABLED": str(on)})  # fmt: skip
    finally:
        server.stop()
    return result


def report(result: dict) -> None:
    if "skipped" in result:
        print(f"  skipped: {result['skipped']}")
        return
    p = result["in_process"]
    alone, ours = 1000 * p["alone"] / p["pages"], 1000 * p["ours"] / p["pages"]
    print(f"  in one process, {p['pages']} pages of Python's docs (HTML {p['html_bytes']:,.0f} "
          "bytes a page on average):")  # fmt: skip
    alone_name = "the libraries alone (trafilatura: one extraction, markdown and text; py3langid)"
    print(f"  {alone_name:80s} {alone:7.2f} ms/page")
    print(f"  {'build_document (the same, from a Scrapy response)':80s} {ours:7.2f} ms/page "
          f"({ours / alone:.2f}x; target at most 1.10x)")  # fmt: skip
    print(f"  bytes per document (JSON): {p['bytes']:,.0f}; the first 50 pages' "
          f"{p['bytes_unchunked']:,.0f}, with chunks of 500 tokens "
          f"{p['bytes_chunked']:,.0f}")  # fmt: skip
    off, on = result["crawl"][False], result["crawl"][True]
    a = 1000 * off["cpu"] / max(off["pages"], 1)
    b = 1000 * on["cpu"] / max(on["pages"], 1)
    print(f"  a crawl of the docs whole, the site spider, one node: {a:.2f} ms/page without "
          f"documents, {b:.2f} with ({b / a if a else 0:.2f}x), {on['pages']} pages")  # fmt: skip
