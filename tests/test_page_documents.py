"""Documents for search and language models (extensions/documents/): pages with
known main text wrapped in boilerplate, read by the extraction on responses the
tests build, and a crawl of a real server (Debian's nginx) storing them."""

from __future__ import annotations

import itertools
import json
import tempfile
from pathlib import Path

import pytest
from scrapy.http import HtmlResponse, Request, Response, TextResponse

from demosite import markdownpages
from extensions.documents.chunks import chunk, estimate_tokens
from extensions.documents.extract import MAX_BYTES, NotADocument, build_document
from servers import services
from servers.nginx import nginx_binary, start_tls_nginx
from tests.conftest import read_items, scrapy
from tests.documents_pages import (
    BOILERPLATE,
    ENGLISH,
    GERMAN,
    JAPANESE,
    REPORT,
    STRUCTURE,
    a_docx,
    a_pdf,
    page,
    site_pages,
    token_f1,
)

URL = "http://magazine.test/articles/x"


def response(html: str | bytes, url: str = URL, kind: str = "text/html; charset=utf-8"):
    body = html.encode() if isinstance(html, str) else html
    return HtmlResponse(url, body=body, headers={"Content-Type": kind},
                        request=Request(url))  # fmt: skip


def expected_text(title: str, paragraphs: list[str], extra: str = "") -> str:
    from parsel import Selector

    extra_text = " ".join(Selector(text=extra).xpath("//text()").getall()) if extra else ""
    return " ".join([title, *paragraphs, f"{title} today", extra_text])


@pytest.mark.parametrize(
    ("title", "paragraphs", "lang"),
    [("The Lighthouse", ENGLISH, "en"), ("Brot", GERMAN, "de"), ("富士山", JAPANESE, "ja")],
)
def test_the_main_text_is_kept_the_boilerplate_left_and_the_language_read(title, paragraphs, lang):
    # every page declares lang="en", as a site's template would
    document = build_document(response(page(title, paragraphs, lang="en")))
    expected = expected_text(title, paragraphs)
    assert token_f1(document["markdown"], expected) >= 0.9, document["markdown"]
    assert token_f1(document["text"], expected) >= 0.9, document["text"]
    for phrase in BOILERPLATE:
        assert phrase.lower() not in document["markdown"].lower(), phrase
    assert document["lang"] == lang
    assert document["title"] == title
    assert document["description"] == f"All about {title}"
    assert document["canonical"].startswith("http://magazine.test/articles/")
    assert document["tokens"] == estimate_tokens(document["markdown"]) > 0


def test_headings_lists_tables_links_and_code_stay_in_the_markdown_with_the_pages_dates():
    head = (
        '<script type="application/ld+json">{"@type": "Article", "datePublished": '
        '"2024-03-01", "dateModified": "2024-04-02"}</script>'
        '<script type="application/ld+json">{not json</script>'
        '<script type="application/ld+json">{"$where": "x", "a.b": 1}</script>'
        '<script type="application/ld+json">' + "[" * 150 + "]" * 150 + "</script>"
    )
    document = build_document(response(page("The Lighthouse", ENGLISH, extra=STRUCTURE,
                                            head=head)))  # fmt: skip
    markdown = document["markdown"]
    assert "# The Lighthouse" in markdown and "## The Lighthouse today" in markdown
    assert "- oil can" in markdown
    assert "| Year | Keeper |" in markdown and "| 1950 | Ada Pike |" in markdown
    assert "[museum page](http://magazine.test/museum)" in markdown
    assert "light.on()" in markdown
    assert token_f1(markdown, expected_text("The Lighthouse", ENGLISH, STRUCTURE)) >= 0.9
    # the structured data that parses and a store takes; the others are skipped
    assert document["json_ld"] == [
        {"@type": "Article", "datePublished": "2024-03-01", "dateModified": "2024-04-02"}
    ]
    assert document["published"] == "2024-03-01" and document["modified"] == "2024-04-02"


def test_the_whole_page_is_kept_when_asked_its_markdown_still_markdown():
    document = build_document(response(page("The Lighthouse", ENGLISH)), main_content=False)
    assert "Accept all cookies" in document["text"] and ENGLISH[0][:40] in document["text"]
    markdown = document["markdown"]
    assert "# The Lighthouse" in markdown.splitlines()  # a heading, not a line of text
    assert "Accept all cookies" in markdown and ENGLISH[0][:40] in markdown
    assert "<" not in markdown  # no tag left: scripts and styles go, the rest is converted


def test_chunks_are_cut_at_headings_and_paragraphs_with_their_path_url_and_overlap():
    document = build_document(response(page("The Lighthouse", ENGLISH)), chunk_size=60,
                              chunk_overlap=30)  # fmt: skip
    chunks = document["chunks"]
    assert len(chunks) >= 3
    assert all(c["tokens"] == estimate_tokens(c["text"]) <= 60 for c in chunks)
    assert chunks[0]["headings"] == ["The Lighthouse"]
    assert chunks[-1]["headings"] == ["The Lighthouse", "The Lighthouse today"]
    assert chunks[-1]["url"] == URL + "#the-lighthouse-today"
    # every paragraph is in a chunk; a chunk repeats the end of the one before it
    for paragraph in ENGLISH:
        assert any(paragraph in c["text"] for c in chunks), paragraph
    assert any(
        earlier["text"].split("\n\n")[-1] in later["text"]
        for earlier, later in itertools.pairwise(chunks)
        if earlier["headings"] == later["headings"]
    )
    assert not chunk(document["markdown"], URL, 60)[-1]["text"].startswith("Ships")  # no overlap
    # a paragraph longer than a chunk is cut at its sentences
    long = chunk("# T\n\n" + " ".join(["One sentence of several words here."] * 40), URL, 50)
    assert len(long) > 1 and all(c["tokens"] <= 50 for c in long)


def test_bad_input_gets_a_document_with_what_could_be_read_or_a_reason():
    plain = TextResponse(URL, body=b"just text", headers={"Content-Type": "text/plain"})
    with pytest.raises(NotADocument) as refused:
        build_document(plain)
    assert refused.value.reason == "not_html"
    with pytest.raises(NotADocument) as refused:
        build_document(response("   "))
    assert refused.value.reason == "empty"
    # broken markup: unclosed tags, a stray end tag
    broken = page("The Lighthouse", ENGLISH).replace("</p>", "", 3).replace("<main>", "</div>")
    assert token_f1(build_document(response(broken))["text"], " ".join(ENGLISH)) >= 0.8
    # a wrong charset: Latin-1 bytes said to be UTF-8
    latin = page("Brot", GERMAN, lang="de").encode("latin-1", errors="replace")
    document = build_document(response(latin))
    assert document["lang"] == "de" and "Sauerteig" in document["text"]
    # a huge page: read up to MAX_BYTES, no more
    huge = page("The Lighthouse", ENGLISH).replace("</footer>", "x" * (MAX_BYTES * 2) + "</footer>")
    assert ENGLISH[0][:40] in build_document(response(huge))["text"]


def binary(body: bytes, kind: str, url: str = URL + ".bin") -> Response:
    return Response(url, body=body, headers={"Content-Type": kind}, request=Request(url))


def test_a_pdf_and_a_docx_become_documents_and_what_cannot_be_read_gets_a_reason():
    pdf = build_document(binary(a_pdf(), "application/pdf"), chunk_size=50)
    assert pdf["served_as"] == "pdf" and pdf["title"] == "Harbour report"
    assert token_f1(pdf["text"], " ".join(REPORT)) >= 0.9 and pdf["lang"] == "en"
    assert pdf["chunks"] and pdf["tokens"] > 0
    # the type is sniffed: a server that calls a DOCX something else
    word = build_document(binary(a_docx(), "application/octet-stream"))
    assert word["served_as"] == "docx" and word["title"] == "Harbour notes"
    assert word["markdown"].startswith("# Harbour notes") and "## Cargo" in word["markdown"]
    assert "- timber" in word["markdown"] and "| grain | 120 |" in word["markdown"]
    in_word = " ".join([*REPORT, "Harbour notes Cargo timber Cargo Tons grain 120"])
    assert token_f1(word["text"], in_word) >= 0.9
    for body, reason in (
        (a_pdf(password="secret"), "encrypted"),
        (a_pdf()[:400], "malformed"),  # cut short: a download that broke off
        (b"\x89PNG\r\n\x1a\n" + bytes(200), "binary_type"),
        (b"PK\x03\x04" + bytes(100), "binary_type"),  # a zip that is not one
    ):
        with pytest.raises(NotADocument) as refused:
            build_document(binary(body, "application/pdf"))
        assert refused.value.reason == reason, reason


@pytest.mark.skipif(not nginx_binary(), reason="nginx-light is not installed (make system-tools)")
def test_the_site_spider_stores_each_page_with_its_document(
    redis_url, redis_client, nodes, tmp_path
):
    # (nginx's workers read the pages: not under pytest's own private directory)
    with tempfile.TemporaryDirectory() as readable:
        root = Path(readable)
        root.chmod(0o755)
        for name, html in site_pages().items():
            (root / name).write_text(html, encoding="utf-8")
            (root / name).chmod(0o644)
        for name, body in (("report.pdf", a_pdf()), ("notes.docx", a_docx())):
            (root / name).write_bytes(body)
            (root / name).chmod(0o644)
        served = crawl_the_site(root, redis_url, redis_client, nodes, tmp_path)
    served_before = served.read_text().count("\n")
    crawled = read_items(nodes.tmp_path / "items")
    items = {item["url"].rsplit("/", 1)[1]: item for item in crawled}
    assert {"de.html", "en.html", "ja.html"} <= set(items)  # (and the index)
    english = items["en.html"]
    assert english["status"] == 200 and english["lang"] == "en"  # the page's fields stay
    assert token_f1(english["markdown"], expected_text("The Lighthouse", ENGLISH, STRUCTURE)) >= 0.9
    assert english["published"] == "2024-03-01" and english["chunks"]
    assert all(c["tokens"] <= 80 for c in english["chunks"])
    assert items["de.html"]["lang"] == "de" and items["ja.html"]["lang"] == "ja"
    # links to a PDF and a DOCX are followed when documents are on (Scrapy skips them)
    assert items["report.pdf"]["served_as"] == "pdf" and REPORT[0] in items["report.pdf"]["text"]
    assert items["notes.docx"]["markdown"].startswith("# Harbour notes")
    for item in (english, items["de.html"], items["ja.html"]):
        assert not any(phrase.lower() in item["markdown"].lower() for phrase in BOILERPLATE)
    stats = json.loads((nodes.tmp_path / "node-1.stats.json").read_text())
    assert stats["documents/built"] + stats.get("documents/skipped/empty", 0) >= 3
    # the same documents from the archive, the site gone: no request can be sent
    shown = scrapy("reparse", "site", "--documents", "-s", f"WARC_DIR={tmp_path / 'warc'}",
                   "-s", f"REDIS_URL={redis_url}", "-s", f"ITEMS_DIR={tmp_path / 'again'}",
                   "-s", "DOCUMENTS_CHUNK_SIZE=80")  # fmt: skip
    assert shown.returncode == 0, shown.stderr[-3000:]
    assert served.read_text().count("\n") == served_before
    # (the document's fields: which copy a page duplicates follows the order pages come in)
    fields = ("url", "canonical", "title", "description", "lang", "published", "modified",
              "markdown", "text", "json_ld", "tokens", "chunks")  # fmt: skip

    def lasting(found: list[dict]) -> list[dict]:
        return sorted(({k: i.get(k) for k in fields} for i in found), key=str)

    assert lasting(read_items(tmp_path / "again")) == lasting(crawled)


def crawl_the_site(root: Path, redis_url, redis_client, nodes, tmp_path) -> Path:
    """The site crawled with documents and archived; nginx's access log."""
    server = start_tls_nginx(tmp_path / "nginx", root, {"magazine.test": None}, tls=False)
    try:
        redis_client.lpush("site:start_urls", server.url + "/index.html")
        nodes.start("site", redis_url, MAX_IDLE_TIME_BEFORE_CLOSE=2, DOCUMENTS_ENABLED=True,
                    DOCUMENTS_CHUNK_SIZE=80, WARC_ENABLED=True,
                    WARC_DIR=tmp_path / "warc")  # fmt: skip
        assert nodes.wait(120) == [0], nodes.tail()
    finally:
        server.stop()
    return tmp_path / "nginx" / "access.log"


def test_a_page_served_as_markdown_is_kept_as_served_when_markdown_is_preferred(
    redis_url, redis_client, nodes, mongo_db
):
    """The markdown crawl stores into MongoDB (documents with their chunks, as any
    item), the other into JSON Lines files."""
    mongo_uri, database, db = mongo_db
    site = services.start_demo_site()
    try:
        for node, prefer in (("md", True), ("html", False)):
            redis_client.flushall()
            redis_client.lpush("site:start_urls", site.url + "/md/")
            store = {"MONGO_URI": mongo_uri, "MONGO_DATABASE": database} if prefer else {}
            nodes.start("site", redis_url, NODE_ID=node, MAX_IDLE_TIME_BEFORE_CLOSE=2,
                        DOCUMENTS_ENABLED=True, DOCUMENTS_PREFER_MARKDOWN=prefer,
                        DOCUMENTS_CHUNK_SIZE=40, **store)  # fmt: skip
            assert nodes.wait(120)[-1] == 0, nodes.tail()
    finally:
        site.stop()
    for node in ("md", "html"):
        if node == "md":
            found = list(db["site"].find({}, {"_id": 0}))
        else:
            path = nodes.tmp_path / "items" / "site" / f"{node}.jsonl"
            found = [json.loads(line) for line in path.read_text().splitlines()]
        items = {item["url"].rsplit("/", 1)[1]: item for item in found}
        assert all(item["chunks"] for item in found)
        # the link in the markdown was followed: a page served as HTML either way
        assert sorted(items) == ["", "article", "html-only"], sorted(items)
        assert items["html-only"]["markdown"].startswith("# Tide tables")
        article = items["article"]
        if node == "md":  # byte for byte, with what the site said of it
            assert article["markdown"].encode() == markdownpages.MARKDOWN.encode()
            assert article["tokens"] == int(markdownpages.TOKENS)
            assert article["content_signal"] == markdownpages.SIGNAL
            assert article["served_as"] == "markdown" and article["lang"] == "en"
            assert article["title"] == "Tides of the North Sea"
        else:  # the HTML the site answers others, converted
            assert "served_as" not in article and "The tide rises" in article["markdown"]
            assert article["markdown"] != markdownpages.MARKDOWN
