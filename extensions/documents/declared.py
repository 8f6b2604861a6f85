"""Documents, declared (``extensions/capability.py``): an HTML page's main content
as markdown and text, with its metadata, structured data and chunks. How:
``extract.py`` (the page to a document), ``chunks.py`` (a document cut at
headings and paragraphs)."""

from __future__ import annotations

from extensions.capability import Capability, Setting
from extensions.settingchecks import flag, number

CAPABILITY = Capability(
    name="documents",
    about="documents for search and language models: main content as markdown and "
    "text, metadata, chunks (extensions/documents/)",
    settings={
        "DOCUMENTS_ENABLED": Setting(
            False,
            "the generic spiders (site, web) store each HTML page as a document: its "
            "main content as markdown and text, title, description, language, dates, "
            "JSON-LD and a token estimate (any spider: self.document(response))",
            flag,
        ),
        "DOCUMENTS_MAIN_CONTENT": Setting(
            True,
            "a document holds the page's main content, without navigation, footers, "
            "cookie banners and related links; False: the whole page (its markdown by "
            "markdownify)",
            flag,
        ),
        "DOCUMENTS_PREFER_MARKDOWN": Setting(
            False,
            "requests ask for text/markdown first (Accept); a page a site serves as "
            "markdown is kept as served, its x-markdown-tokens and Content-Signal "
            "noted; other answers are converted",
            flag,
        ),
        "DOCUMENTS_CHUNK_SIZE": Setting(
            0,
            "tokens (estimated) a document's chunks hold at most, cut at headings and "
            "paragraphs, each with its heading path and URL (0: no chunks)",
            number(int, 0),
        ),
        "DOCUMENTS_CHUNK_OVERLAP": Setting(
            0,
            "tokens (estimated) of the end of a chunk the next one repeats",
            number(int, 0),
        ),
    },
    # after Scrapy's DefaultHeadersMiddleware (400): only its Accept is replaced
    downloader_middlewares={"extensions.documents.accept.PreferMarkdown": 410},
)
