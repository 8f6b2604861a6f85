"""The crawl's newest capture of each URL, for what answers from the archive
instead of the site (the API's ``maxAge``, ``scrapy mcp``'s archive look-up).

``NAME:warc_captures:BUCKET`` hashes (65,536 buckets by the first two bytes of
the URL's SHA-1, each a small listpack): the next ten bytes -> where its newest
capture lies and when it was made (a JSON object, about 100 bytes): ``f`` the
file, ``o`` and ``l`` the offset and length of the record that holds its
payload (a revisit's: its original's), ``d`` the WARC-Date, ``s`` the status.
A capture is entered with the node's next flush, once its record is synced
(``part.py``), as the revisit index's payloads are; a newer one replaces it.

Redis holds at most ``WARC_CAPTURES_IN_REDIS`` URLs; past that no capture is
entered (``warc/captures_not_entered``: whether a URL has one already would cost
a read a page), those entered age, and what it lacks is fetched live.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from io import BytesIO
from typing import Any

from warcio.archiveiterator import ArchiveIterator

#: captures waiting for their records' sync at most (Redis away a long time)
MAX_UNPUBLISHED = 10_000
#: bytes of one record read back at most (WARC_MAX_SIZE bounds its file)
MAX_RECORD = 64_000_000


@dataclass(frozen=True)
class Capture:
    url: str
    file: str
    offset: int
    length: int
    date: str  # WARC-Date
    status: int


@dataclass
class Archived:
    """A capture read back: the page as its callbacks saw it (body decoded)."""

    url: str
    date: str
    status: int
    headers: list[tuple[str, str]]
    body: bytes
    rendered: bool


def _where(prefix: str, url: str) -> tuple[str, bytes]:
    digest = hashlib.sha1(url.encode("utf-8", "surrogateescape")).digest()
    return f"{prefix}{digest[:2].hex()}", digest[2:12]


class CaptureIndex:
    """The crawl's capture index, as one node adds to it."""

    def __init__(self, server: Any, prefix: str, most_in_redis: int):
        self.server = server
        self.prefix = prefix
        self.count_key = f"{prefix}count"
        self.most_in_redis = most_in_redis
        self.full: bool | None = None  # as the last publish saw
        self.not_entered = 0  # captures past Redis's share, since the last look
        self._new: dict[tuple[str, bytes], str] = {}

    def stage(self, url: str, file: str, offset: int, length: int, date: str,
              status: int) -> None:  # fmt: skip
        """A capture written to the node's file: entered at the next ``publish``."""
        if self.full or len(self._new) >= MAX_UNPUBLISHED:
            self.not_entered += 1
            return
        entry = {"f": file, "o": offset, "l": length, "d": date, "s": status}
        self._new[_where(self.prefix, url)] = json.dumps(entry, separators=(",", ":"))

    def publish(self) -> int:
        """Enter the captures staged since the last call (their records are on
        disk now); how many. Raises redis.RedisError and keeps them."""
        if not self._new:
            return 0
        pipe = self.server.pipeline(transaction=False)
        for (key, field), value in self._new.items():
            pipe.hset(key, field, value)
        answers = pipe.execute()
        created = sum(int(answer or 0) for answer in answers)
        count = self.server.incrby(self.count_key, created) if created else None
        if count is None:
            count = self.server.get(self.count_key)
        self.full = int(count or 0) >= self.most_in_redis
        entered = len(self._new)
        self._new.clear()
        return entered


def lookup(server: Any, prefix: str, url: str) -> Capture | None:
    """The newest capture the index has of ``url``, or None (none, or a value
    no node writes). Raises redis.RedisError."""
    raw = server.hget(*_where(prefix, url))
    if raw is None:
        return None
    try:
        entry = json.loads(raw)
        capture = Capture(url, entry["f"], entry["o"], entry["l"], entry["d"], entry["s"])
    except (TypeError, ValueError, KeyError):
        return None
    sound = (
        isinstance(capture.file, str) and "/" not in capture.file and capture.file
        and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0
                for n in (capture.offset, capture.length, capture.status))
        and 0 < capture.length <= MAX_RECORD and isinstance(capture.date, str)
    )  # fmt: skip
    return capture if sound else None


def read_capture(data: bytes, capture: Capture) -> Archived | None:
    """The record ``data`` holds (one gzip member, as the writer makes each), as
    its page (a revisit's original may be another URL's record of the same
    payload): None if it is no payload record."""
    try:
        record = next(iter(ArchiveIterator(BytesIO(data))), None)
        if record is None or record.rec_type not in ("response", "resource"):
            return None
        rendered = record.rec_type == "resource"
        body = record.content_stream().read(MAX_RECORD)  # Content-Encoding undone
        if rendered:
            kind = record.rec_headers.get_header("Content-Type") or "text/html"
            headers = [("Content-Type", kind)]
        else:
            headers = [(name, value) for name, value in record.http_headers.headers
                       if name.lower() not in ("content-encoding", "content-length")]  # fmt: skip
    except Exception:  # warcio and zlib raise many kinds on bytes that are no record
        return None
    return Archived(capture.url, capture.date, capture.status, headers, body, rendered)
