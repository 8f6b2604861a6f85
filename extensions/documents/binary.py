"""PDF and DOCX responses to documents: the type sniffed from the bytes (a
server's Content-Type is often wrong), the size capped, nothing in them run.

PDF by pypdf (BSD, pure Python, maintained: its text, page by page, with
nothing executed: no JavaScript, no forms); DOCX by python-docx (MIT: its
paragraphs, headings as markdown headings, and its tables).
"""

from __future__ import annotations

import io
import zipfile
from typing import Any

from extensions.documents.errors import NotADocument

MAX_BINARY_BYTES = 20_000_000  # a PDF or a DOCX read at most: a bigger one makes none
MAX_PAGES = 500  # a PDF's pages read at most
MAX_UNPACKED = 50_000_000  # a DOCX's text part unpacked at most (a zip bomb makes none)


def sniff(body: bytes) -> str | None:
    """'pdf', 'docx' or None, from the bytes."""
    if body[:1024].lstrip().startswith(b"%PDF-"):
        return "pdf"
    if body.startswith(b"PK\x03\x04"):
        try:
            with zipfile.ZipFile(io.BytesIO(body)) as archive:
                if "word/document.xml" in archive.namelist():
                    return "docx"
        except (zipfile.BadZipFile, ValueError, OSError):
            return None
    return None


def pdf(body: bytes) -> tuple[str | None, str]:
    """(title, text) of a PDF; raises NotADocument."""
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(body), strict=False)
        if reader.is_encrypted and not reader.decrypt(""):
            raise NotADocument("encrypted")
        title = (reader.metadata.title if reader.metadata else None) or None
        pages = [page.extract_text() or "" for page in reader.pages[:MAX_PAGES]]
    except NotADocument:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, OSError, NotImplementedError) as exc:
        reason = "encrypted" if "decrypt" in str(exc).lower() else "malformed"
        raise NotADocument(reason) from exc
    text = "\n\n".join(page.strip() for page in pages if page.strip())
    return (str(title)[:2000] if title else None), text


def docx(body: bytes) -> tuple[str | None, str, str]:
    """(title, markdown, text) of a DOCX; raises NotADocument."""
    import docx as python_docx

    try:
        with zipfile.ZipFile(io.BytesIO(body)) as archive:
            if archive.getinfo("word/document.xml").file_size > MAX_UNPACKED:
                raise NotADocument("too_big")
        document = python_docx.Document(io.BytesIO(body))
    except NotADocument:
        raise
    except (zipfile.BadZipFile, KeyError, ValueError, OSError) as exc:
        raise NotADocument("malformed") from exc
    blocks: list[str] = []
    plain: list[str] = []
    for paragraph in document.paragraphs:
        text = paragraph.text.strip()
        if not text:
            continue
        style = (paragraph.style.name if paragraph.style is not None else "") or ""
        if style.startswith("Heading ") and style[8:].isdigit():
            blocks.append("#" * min(int(style[8:]), 6) + " " + text)
        elif style == "Title":
            blocks.append("# " + text)
        elif style.startswith("List"):
            blocks.append("- " + text)
        else:
            blocks.append(text)
        plain.append(text)
    for table in document.tables:
        rows = [[cell.text.strip().replace("|", "\\|") for cell in row.cells] for row in table.rows]
        if rows:
            lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
            lines += ["| " + " | ".join(row) + " |" for row in rows[1:]]
            blocks.append("\n".join(lines))
            plain.extend(" ".join(row) for row in rows)
    title = document.core_properties.title or None
    return title, "\n\n".join(blocks), "\n\n".join(plain)


def binary_document(kind: str, body: bytes) -> dict[str, Any]:
    """The fields a PDF or a DOCX gives (the caller adds URL, language, chunks)."""
    if len(body) > MAX_BINARY_BYTES:
        raise NotADocument("too_big")
    if kind == "pdf":
        title, text = pdf(body)
        markdown = text
    else:
        title, markdown, text = docx(body)
    if not text.strip():
        raise NotADocument("empty")
    return {"title": title, "markdown": markdown, "text": text, "served_as": kind}
