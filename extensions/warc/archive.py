"""Reading a spider's WARC files back (``scrapy reparse``): each fetch as one
:class:`Exchange` (the response or revisit record and the metadata written
with it), a file read up to its last whole record, and a revisit's payload
found in the record it refers to.

A revisit's original is looked for where its writer must have put it: the
writer's file (one per node process at a time) that was open at the original's
date, through that file's CDXJ index, or, when the index lacks it (a node
killed before its index line), by reading that file. At most ``CACHED_INDEXES``
indexes are held at once: memory stays bounded whatever the archive's size.
"""

from __future__ import annotations

import json
import logging
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from warcio.archiveiterator import ArchiveIterator

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

logger = logging.getLogger(__name__)

CACHED_INDEXES = 4
#: how long after a record's WARC-Date its file may have been opened (the first
#: record of a file is made before the file is)
OPENED_AFTER = timedelta(seconds=5)
PAYLOAD_RECORDS = ("response", "revisit", "resource")


@dataclass
class Exchange:
    """One archived fetch: what a reparse turns back into a response."""

    url: str
    date: str  # WARC-Date
    status: int
    headers: list[tuple[str, str]]
    payload: bytes | None  # None for a revisit until its original is found
    path: Path
    offset: int
    revisit_of: tuple[str, str, str] | None = None  # (URL, date, payload digest)
    rendered: bool = False  # a DOM a browser rendered (a resource record)
    fields: dict[str, str] = field(default_factory=dict)  # the metadata record's

    @property
    def fetched(self) -> datetime:
        return parse_date(self.date)


@dataclass
class Damage:
    """What could not be read of a file: from ``offset`` to its end."""

    path: Path
    offset: int
    error: str


def parse_date(text: str) -> datetime:
    """A WARC-Date, or a date or time given by a user (no zone: UTC)."""
    moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


class CutRecord(Exception):
    """A record whose content ends before its Content-Length."""


def _content(record: Any) -> bytes:
    """A record's payload as stored; raises CutRecord if the file ends inside it
    (warcio reads a cut last record without a word)."""
    data = record.raw_stream.read()
    if getattr(record.raw_stream, "limit", 0) > 0:
        url = record.rec_headers.get_header("WARC-Target-URI")
        raise CutRecord(f"the {record.rec_type} record of {url} is cut short")
    return data


def _fields(payload: bytes) -> dict[str, str]:
    found = {}
    for line in payload.decode("utf-8", "replace").split("\r\n"):
        name, sep, value = line.partition(": ")
        if sep:
            found[name] = value
    return found


def _exchange(record: Any, path: Path) -> Exchange:
    http = record.http_headers
    if record.rec_type == "resource":  # a rendered DOM: its status is in the metadata
        kind = record.rec_headers.get_header("Content-Type") or "text/html"
        return Exchange(url=record.rec_headers.get_header("WARC-Target-URI") or "",
                        date=record.rec_headers.get_header("WARC-Date") or "", status=0,
                        headers=[("Content-Type", kind)], payload=_content(record), path=path,
                        offset=0, rendered=True)  # fmt: skip
    try:  # warcio parses no HTTP headers of a URL that is not http(s): no status
        status = int(http.get_statuscode()) if http is not None else 0
    except (TypeError, ValueError):
        status = 0
    headers = record.rec_headers
    exchange = Exchange(
        url=headers.get_header("WARC-Target-URI") or "",
        date=headers.get_header("WARC-Date") or "",
        status=status,
        headers=list(http.headers) if http is not None else [],
        payload=None,
        path=path,
        offset=0,
    )
    if record.rec_type == "revisit":
        exchange.revisit_of = (
            headers.get_header("WARC-Refers-To-Target-URI") or "",
            headers.get_header("WARC-Refers-To-Date") or "",
            headers.get_header("WARC-Payload-Digest") or "",
        )
    else:  # as it came off the wire: Scrapy's middlewares decode it again
        exchange.payload = _content(record)
    return exchange


def read_exchanges(path: Path) -> Iterator[Exchange | Damage]:
    """The exchanges of one file in order, then a :class:`Damage` if the file
    does not end with a whole record. An exchange whose metadata record is cut
    is left out with the rest: its writer died before its lease was released,
    so another node fetched the page again."""
    whole = 0  # bytes of the file read as whole records
    pending: Exchange | None = None
    pending_id = None
    try:
        with path.open("rb") as stream:
            records = ArchiveIterator(stream)
            for record in records:
                if record.format != "warc":  # warcio takes any text for an ARC record
                    raise ValueError(f"not a WARC record ({record.format})")
                kind = record.rec_type
                # warcio's offset reads the record to its end: asked after the content
                if kind in PAYLOAD_RECORDS:
                    if pending is not None:
                        yield pending
                    pending = _exchange(record, path)
                    pending_id = record.rec_headers.get_header("WARC-Record-ID")
                    if pending is not None:
                        pending.offset = records.get_record_offset()
                elif kind == "metadata" and pending is not None:
                    if record.rec_headers.get_header("WARC-Concurrent-To") == pending_id:
                        pending.fields = _fields(_content(record))
                        if pending.rendered and pending.fields.get("status", "").isdigit():
                            pending.status = int(pending.fields["status"])
                    yield pending
                    pending = None
                else:
                    _content(record)
                whole = records.get_record_offset() + records.get_record_length()
    except Exception as exc:  # warcio and zlib raise many kinds on a cut or bad file
        yield Damage(path, whole, f"{type(exc).__name__}: {str(exc)[:200]}")
        return
    if pending is not None:
        yield pending
    size = path.stat().st_size
    if whole < size:  # what warcio stopped at without a word
        yield Damage(path, whole, f"{size - whole} bytes after it are not a WARC record")


def _record_at(path: Path, offset: int, digest: str) -> bytes | None:
    try:
        with path.open("rb") as stream:
            stream.seek(offset)
            for record in ArchiveIterator(stream):
                same = record.rec_headers.get_header("WARC-Payload-Digest") == digest
                if record.rec_type == "response" and same:
                    return record.raw_stream.read()
                return None
    except Exception:  # a bad offset in an index, a damaged record
        return None
    return None


# spider-YYYYmmddHHMMSS-node-pid-sequence.warc.gz (files.py names them so)
NAME = re.compile(r"^(?P<stamp>\d{14})-(?P<writer>.+)-(?P<sequence>\d+)\.warc\.gz$")


class Originals:
    """Finds the payload a revisit refers to, in a spider's files."""

    def __init__(self, names: list[str], spider: str, fetch: Callable[[str], Path | None]):
        self.fetch = fetch  # a file of the archive by name, on disk (storage.py)
        self.chains: dict[str, list[tuple[str, int, str]]] = {}
        for name in names:
            match = NAME.match(name.removeprefix(spider + "-"))
            if match:
                chain = self.chains.setdefault(match["writer"], [])
                chain.append((match["stamp"], int(match["sequence"]), name))
        for chain in self.chains.values():
            chain.sort()
        self._indexes: OrderedDict[str, dict[str, list[int]]] = OrderedDict()

    def payload(self, url: str, date: str, digest: str) -> bytes | None:
        stamp = "".join(ch for ch in date if ch.isdigit())[:14]
        try:  # a record is made before the file it goes to may be opened: a little later
            latest = (parse_date(date) + OPENED_AFTER).strftime("%Y%m%d%H%M%S")
        except ValueError:
            latest = stamp
        for chain in self.chains.values():
            # the writer's file open at that date: the last opened before it, or
            # one opened in the same second (names have whole seconds) or just after
            for opened, _, name in reversed(chain):
                if opened > latest:
                    continue
                body = self._find(name, digest)
                if body is not None:
                    return body
                if opened < stamp:
                    break
        return None

    def _find(self, name: str, digest: str) -> bytes | None:
        for offset in self._index(name).get(digest, ()):
            path = self.fetch(name)
            body = _record_at(path, offset, digest) if path else None
            if body is not None:
                return body
        return None

    def _index(self, name: str) -> dict[str, list[int]]:
        """Payload digest -> offsets of the file's response records: its CDXJ
        index, and what the index lacks (a writer killed before its line) read
        from the file itself."""
        if name in self._indexes:
            self._indexes.move_to_end(name)
            return self._indexes[name]
        offsets: dict[str, list[int]] = {}
        covered = 0
        index = self.fetch(f"{name}.cdxj")
        if index is not None:
            with index.open(encoding="utf-8", errors="replace") as lines:
                for line in lines:
                    try:
                        entry = json.loads(line.split(" ", 2)[2])
                        offset, length = int(entry["offset"]), int(entry["length"])
                    except (IndexError, ValueError, TypeError, KeyError, AttributeError):
                        continue  # a line cut by a kill
                    covered = max(covered, offset + length)
                    if entry.get("mime") != "warc/revisit" and entry.get("digest"):
                        offsets.setdefault(str(entry["digest"]), []).append(offset)
        path = self.fetch(name)
        if path is not None:
            self._read_rest(path, covered, offsets)
        self._indexes[name] = offsets
        if len(self._indexes) > CACHED_INDEXES:
            self._indexes.popitem(last=False)
        return offsets

    @staticmethod
    def _read_rest(path: Path, start: int, offsets: dict[str, list[int]]) -> None:
        try:
            with path.open("rb") as stream:
                stream.seek(start)
                records = ArchiveIterator(stream)
                for record in records:
                    digest = record.rec_headers.get_header("WARC-Payload-Digest")
                    if record.rec_type == "response" and digest:
                        offset = start + records.get_record_offset()
                        offsets.setdefault(digest, []).append(offset)
        except Exception:  # the cut end of a killed writer's file
            return
