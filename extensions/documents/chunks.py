"""A document's markdown cut into chunks for a search index or a language model:
at headings first, then at paragraphs, each chunk at most ``size`` tokens
(estimated), the next repeating the last ``overlap`` tokens' paragraphs. Each
chunk keeps its heading path (the headings above it) and a URL to its section.

No maintained splitter fits without a framework behind it (LangChain's
splitters come with LangChain), and the rule is a few lines: cut where the
author did, never inside a paragraph unless the paragraph alone is too long.
"""

from __future__ import annotations

import re
from typing import Any

HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
# a token of a language model, roughly: a word, a number, a mark, or one
# character of a script written without spaces (Chinese, Japanese, Thai...)
UNSPACED = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\u0e00-\u0e7f"
TOKEN = re.compile(f"[{UNSPACED}]|[^\\W{UNSPACED}]+|[^\\w\\s]")
SENTENCE_END = re.compile("(?<=[.!?\u3002\uff01\uff1f])\\s*")


def estimate_tokens(text: str) -> int:
    """About the tokens a language model's tokenizer makes of ``text``."""
    return sum(1 for _ in TOKEN.finditer(text))


def slug(heading: str) -> str:
    """The anchor a heading usually gets (GitHub's rule, the common one)."""
    kept = re.sub(r"[^\w\- ]", "", heading.lower()).strip()
    return re.sub(r"\s", "-", kept)


def sections(markdown: str) -> list[tuple[list[str], list[str]]]:
    """(heading path, paragraphs) in the order they come."""
    found: list[tuple[list[str], list[str]]] = []
    path: list[tuple[int, str]] = []
    paragraphs: list[str] = []
    block: list[str] = []

    def end_block() -> None:
        if block:
            paragraphs.append("\n".join(block).strip())
            block.clear()

    def end_section() -> None:
        end_block()
        kept = [p for p in paragraphs if p]
        if kept:
            found.append(([title for _, title in path], kept))
        paragraphs.clear()

    for line in markdown.splitlines():
        heading = HEADING.match(line)
        if heading:
            end_section()
            level = len(heading.group(1))
            path = [(lv, title) for lv, title in path if lv < level] + [(level, heading.group(2))]
            paragraphs.append(line.strip())
        elif line.strip():
            block.append(line)
        else:
            end_block()
    end_section()
    return found


def split_long(paragraph: str, size: int) -> list[str]:
    """A paragraph over ``size`` tokens, cut at sentence ends, else at words."""
    pieces = SENTENCE_END.split(paragraph)
    out: list[str] = []
    current = ""
    for piece in pieces:
        while estimate_tokens(piece) > size:  # a sentence longer than a chunk
            words = piece.split(" ")
            head = " ".join(words[: max(len(words) // 2, 1)])
            if head == piece:  # one unbroken word: cut its characters
                head = piece[: max(len(piece) // 2, 1)]
            out.append(head)
            piece = piece[len(head) :].lstrip()
        if current and estimate_tokens(current + " " + piece) > size:
            out.append(current)
            current = piece
        else:
            current = f"{current} {piece}".strip()
    if current:
        out.append(current)
    return [p for p in out if p]


def chunk(markdown: str, url: str, size: int, overlap: int = 0) -> list[dict[str, Any]]:
    """The chunks of ``markdown`` (a document at ``url``), in order."""
    if size <= 0:
        return []
    overlap = min(max(overlap, 0), size // 2)
    chunks: list[dict[str, Any]] = []
    for path, paragraphs in sections(markdown):
        pieces = [part for p in paragraphs for part in split_long(p, size)]
        anchor = f"{url.split('#', 1)[0]}#{slug(path[-1])}" if path else url
        current: list[str] = []
        for piece in pieces:
            if current and estimate_tokens("\n\n".join([*current, piece])) > size:
                chunks.append(_chunk(current, path, anchor))
                kept: list[str] = []
                for earlier in reversed(current):  # the overlap: whole paragraphs from the end
                    if estimate_tokens("\n\n".join([earlier, *kept, piece])) > min(
                        overlap + estimate_tokens(piece), size
                    ):
                        break
                    kept.insert(0, earlier)
                current = kept
            current.append(piece)
        if current:
            chunks.append(_chunk(current, path, anchor))
    return chunks


def _chunk(pieces: list[str], path: list[str], url: str) -> dict[str, Any]:
    text = "\n\n".join(pieces)
    return {"text": text, "headings": list(path), "url": url, "tokens": estimate_tokens(text)}
