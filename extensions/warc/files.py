"""One node's WARC files (WARC_ENABLED): WARC/1.1 written by warcio, each
record its own gzip member, so a file cut short by a kill is read up to its
last whole record. A file is rotated at ``WARC_MAX_SIZE``; its name holds the
spider, the time it was opened, the node and a sequence number, so files from
many nodes in one directory never collide. Beside each, ``FILE.cdxj`` indexes
its response records (the format pywb and the Wayback machines read).

``sync()`` makes what was written durable (flush and fsync); the frontier calls
it before a flush releases leases (``part.py``), so a page whose lease is gone
is on disk.
"""

from __future__ import annotations

import json
import logging
import os
import time
from contextlib import suppress
from io import BytesIO
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from extensions import __version__

logger = logging.getLogger(__name__)

RENDERED_TYPE = "text/html; charset=utf-8"  # a rendered DOM, as scrapy-playwright encodes it


def _write_all(handle: Any, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = handle.write(view)
        if not written:
            raise OSError("the write took nothing")
        view = view[written:]


def surt(url: str) -> str:
    """The SURT form CDXJ sorts by: ``com,example)/path?query`` (host reversed,
    a leading www. dropped, lower case, the port kept unless it is the scheme's)."""
    parts = urlsplit(url)
    host = (parts.hostname or "").removeprefix("www.")
    key = ",".join(reversed(host.split(".")))
    default = {"http": 80, "https": 443}.get(parts.scheme)
    if parts.port and parts.port != default:
        key += f":{parts.port}"
    path = parts.path or "/"
    return (key + ")" + path + (f"?{parts.query}" if parts.query else "")).lower()


class WarcFiles:
    """One node's current WARC file and its index. An exchange is written whole
    or not at all: its records are encoded in memory and appended in one write;
    a write that fails (a full disk) is cut back off the file and the index,
    which stay readable to their end and take the next exchange."""

    def __init__(self, directory: Path, spider: str, node: str, max_size: int):
        self.directory = directory
        self.spider = spider
        self.node = node
        self.max_size = max_size
        self.sequence = 0
        self.path: Path | None = None
        self._file: Any = None  # unbuffered: what a write returns is in the OS's hands
        self._index: Any = None
        self._size = 0
        self._index_size = 0
        # builds the records; each exchange is encoded by a writer of its own
        self._writer: WARCWriter | None = None
        self.bytes_written = 0
        self.closed: list[Path] = []  # files closed since the storage last took them
        #: the last exchange's payload record: (file, offset, length)
        self.last_location: tuple[str, int, int] | None = None

    def _open(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.sequence += 1
        stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime())
        name = f"{self.spider}-{stamp}-{self.node}-{os.getpid()}-{self.sequence:05d}.warc.gz"
        self.path = self.directory / name
        # kept open across writes; "x": never another node's file
        self._file = open(self.path, "xb", buffering=0)  # noqa: SIM115
        self._size = self._index_size = 0
        self._writer = self._writer or WARCWriter(BytesIO(), gzip=True, warc_version="1.1")
        info = {"software": f"crawler {__version__} (Scrapy, warcio)", "format": "WARC/1.1",
                "isPartOf": self.spider, "node": self.node}  # fmt: skip
        try:
            self._index = open(f"{self.path}.cdxj", "xb", buffering=0)  # noqa: SIM115
            self._append([self._writer.create_warcinfo_record(name, info)])
        except OSError:
            self.close()
            raise
        logger.info("writing %s", self.path)

    def write_exchange(self, records: list[Any]) -> None:
        """Write one fetch's records (request, response, metadata), opening or
        rotating the file as needed; each response is indexed. Raises OSError,
        and then nothing of the exchange is in the file."""
        if self._file is None or self._size >= self.max_size:
            self.close()
            self._open()
        self._append(records)

    def _append(self, records: list[Any]) -> None:
        buffer = BytesIO()
        writer = WARCWriter(buffer, gzip=True, warc_version="1.1")
        lines = []
        location = None
        for record in records:
            offset = buffer.tell()
            writer.write_record(record)
            if record.rec_type in ("response", "revisit", "resource"):
                location = (self.path.name if self.path else "", self._size + offset,
                            buffer.tell() - offset)  # fmt: skip
                lines.append(self._cdxj_line(record, *location[1:]) + "\n")
        data, index = buffer.getvalue(), "".join(lines).encode()
        try:
            _write_all(self._file, data)
            _write_all(self._index, index)
        except OSError:
            for handle, size in ((self._file, self._size), (self._index, self._index_size)):
                with suppress(OSError):
                    os.ftruncate(handle.fileno(), size)  # frees space: works on a full disk
                    handle.seek(size)  # a part written moved the offset: no hole next time
            raise
        self.last_location = location
        self._size += len(data)
        self._index_size += len(index)
        self.bytes_written += len(data)

    def _cdxj_line(self, record: Any, offset: int, length: int) -> str:
        url = record.rec_headers.get_header("WARC-Target-URI")
        date = record.rec_headers.get_header("WARC-Date") or ""
        fields: dict[str, Any] = {"url": url, "offset": offset, "length": length,
                                  "filename": self.path.name if self.path else ""}  # fmt: skip
        http = record.http_headers
        if http is not None:
            fields["status"] = http.get_statuscode()
            fields["mime"] = (http.get_header("Content-Type") or "").split(";")[0].strip()
        else:  # a rendered DOM
            fields["mime"] = (record.rec_headers.get_header("Content-Type") or "").split(";")[0]
        if record.rec_type == "revisit":
            fields["mime"] = "warc/revisit"  # as pywb's indexer marks them
        digest = record.rec_headers.get_header("WARC-Payload-Digest")
        if digest:
            fields["digest"] = digest
        stamp = "".join(ch for ch in date if ch.isdigit())[:14]
        return f"{surt(url)} {stamp} {json.dumps(fields)}"

    def sync(self) -> None:
        """Make everything written so far durable."""
        for handle in (self._file, self._index):
            if handle is not None:
                handle.flush()
                os.fsync(handle.fileno())

    def close(self) -> None:
        if self._file is None:
            return
        try:
            self.sync()
        finally:
            for handle in (self._file, self._index):
                if handle is not None:
                    handle.close()
            self._file = self._index = None
            if self.path is not None:
                self.closed.append(self.path)

    def revisit(self, response: Any, digest: str, original: dict[str, str]) -> Any:
        """``response`` as a revisit of the first record of its payload: same id
        and headers, no payload."""
        if self._writer is None:
            self._writer = WARCWriter(BytesIO(), gzip=True, warc_version="1.1")
        url = response.rec_headers.get_header("WARC-Target-URI")
        record = self._writer.create_revisit_record(
            url, digest, original["u"], original["d"], http_headers=response.http_headers
        )
        record.rec_headers.replace_header(
            "WARC-Record-ID", response.rec_headers.get_header("WARC-Record-ID")
        )
        record.rec_headers.replace_header("WARC-Date", response.rec_headers.get_header("WARC-Date"))
        record.rec_headers.add_header("WARC-Refers-To", original["r"])
        return record

    def records(
        self, url: str, method: str, request_headers: list[tuple[str, str]], request_body: bytes,
        status: str, response_headers: list[tuple[str, str]], body: bytes, fields: dict[str, str],
        rendered: bool = False,
    ) -> list[Any]:  # fmt: skip
        """The request, response and metadata records of one fetch, built by the
        writer of the current file (one is opened first if need be). A page a
        browser rendered has a ``resource`` record of its DOM for a response."""
        if self._writer is None:
            self._writer = WARCWriter(BytesIO(), gzip=True, warc_version="1.1")
        writer = self._writer
        assert writer is not None
        parts = urlsplit(url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        request = writer.create_warc_record(
            url, "request", payload=BytesIO(request_body), length=len(request_body),
            http_headers=StatusAndHeaders(f"{method} {target} HTTP/1.1", request_headers,
                                          is_http_request=True),
        )  # fmt: skip
        if rendered:
            response = writer.create_warc_record(
                url, "resource", payload=BytesIO(body), length=len(body),
                warc_content_type=RENDERED_TYPE,
            )  # fmt: skip
        else:
            response = writer.create_warc_record(
                url, "response", payload=BytesIO(body), length=len(body),
                http_headers=StatusAndHeaders(status, response_headers, protocol="HTTP/1.1"),
            )  # fmt: skip
        response_id = response.rec_headers.get_header("WARC-Record-ID")
        request.rec_headers.add_header("WARC-Concurrent-To", response_id)
        text = "".join(f"{name}: {value}\r\n" for name, value in fields.items()).encode()
        metadata = writer.create_warc_record(
            url, "metadata", payload=BytesIO(text), length=len(text),
            warc_content_type="application/warc-fields",
            warc_headers_dict={"WARC-Concurrent-To": response_id},
        )  # fmt: skip
        return [request, response, metadata]
