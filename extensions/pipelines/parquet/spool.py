"""A node's Parquet spool: the rows it stored, on its own disk, until they are
committed to a file.

Rows go into segments, one JSON line each with the lease member of the page it
came from, and every write is fsync'ed before the pipeline is told the items
are durable. A page's rows all go to one segment: the segment a page started in
takes its rows until the engine is done with it, even once sealed. A sealed
segment whose pages are all finished is committed with their leases' release
(``part.py``), then built into a Parquet file and published (``publish.py``).

The spool is ``PARQUET_SPOOL_DIR/SPIDER/NODE/``, locked by its node (``flock``)
for as long as it runs: a spool nobody holds was a node's that is gone (killed,
or stopped before it published), and the next node started on that disk takes
it over (``Spool.orphans``).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

SEGMENT_SUFFIX = ".rows.jsonl"


def page_text(member: bytes) -> str:
    return member.decode("utf-8", "surrogateescape")


def page_bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


@dataclass(eq=False)
class Segment:
    id: str
    path: Path
    #: when it was opened (time.monotonic) and its UTC stamp (the file's name)
    opened: float
    stamp: str
    rows: int = 0
    size: int = 0
    sealed: bool = False
    #: pages with rows here that the engine is not done with
    open_pages: set[bytes] = field(default_factory=set)
    #: finished pages' leases: released with the segment's commit
    held: list[bytes] = field(default_factory=list)
    #: "open" (taking rows or waiting for its pages), "committing" (its commit
    #: goes with a flush), "committed" (in the manifest: to be published)
    state: str = "open"
    out: IO[str] | None = None


def read_rows(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(page, row) of a segment file; a line cut short by a kill (its batch was
    never acknowledged) is passed over."""
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            try:
                record = json.loads(line)
                page, row = record["p"], record["r"]
            except (ValueError, KeyError, TypeError):
                continue
            if isinstance(page, str) and isinstance(row, dict):
                yield page, row


class Spool:
    """This node's segments; thread-safe (the store writes from a worker thread,
    the frontier part reads on the reactor's)."""

    def __init__(self, root: Path, spider: str, node_id: str):
        self.root = root / spider
        self.node_dir = self.root / _safe(node_id)
        self.node_id = node_id
        self.lock = threading.Lock()
        self.segments: list[Segment] = []
        #: page -> the segment its rows go to, while the engine is on it
        self.home: dict[bytes, Segment] = {}
        self._seq = 0
        #: in every segment id: a node restarted under its NODE_ID never reuses one
        self.token = uuid.uuid4().hex[:8]
        self._lock_file: IO[str] | None = None

    def open(self) -> None:
        self.node_dir.mkdir(parents=True, exist_ok=True)
        self._lock_file = _take_lock(self.node_dir)
        if self._lock_file is None:
            raise RuntimeError(f"the Parquet spool {self.node_dir} is held by another process")
        left = [path for path in self.node_dir.iterdir() if path.name != "lock"]
        if left:  # a former process's under this node id: taken over as any orphan
            aside = self.root / f"{self.node_dir.name}-before-{self.token}"
            aside.mkdir()
            for path in left:
                path.rename(aside / path.name)

    def close(self) -> None:
        """Let the spool go: what is left in it is the next node's on this disk."""
        with self.lock:
            for segment in self.segments:
                if segment.out is not None:
                    segment.out.close()
                    segment.out = None
        if self._lock_file is not None:
            self._lock_file.close()
            self._lock_file = None
        with contextlib.suppress(OSError):  # empty: nothing left for another node
            self.node_dir.joinpath("lock").unlink()
            self.node_dir.rmdir()

    def write(self, rows: list[tuple[bytes, dict[str, Any]]], max_size: int) -> None:
        """Append (page, row) pairs to their segments and sync them."""
        with self.lock:
            touched: dict[int, Segment] = {}
            for page, row in rows:
                segment = self.home.get(page) if page else None
                if segment is None:
                    segment = self._current(max_size)
                    if page:
                        self.home[page] = segment
                        segment.open_pages.add(page)
                line = json.dumps({"p": page_text(page), "r": row}, ensure_ascii=True) + "\n"
                assert segment.out is not None
                segment.out.write(line)
                segment.rows += 1
                segment.size += len(line)
                touched[id(segment)] = segment
            for segment in touched.values():
                assert segment.out is not None
                segment.out.flush()
                os.fsync(segment.out.fileno())

    def _current(self, max_size: int) -> Segment:
        last = self.segments[-1] if self.segments else None
        if last is not None and not last.sealed and last.size >= max_size:
            last.sealed = True
        if last is None or last.sealed:
            self._seq += 1
            segment_id = f"{_safe(self.node_id)}-{self.token}-{self._seq:05d}"
            path = self.node_dir / f"{segment_id}{SEGMENT_SUFFIX}"
            last = Segment(
                segment_id, path, time.monotonic(), time.strftime("%Y%m%d%H%M%S", time.gmtime())
            )
            last.out = open(path, "a", encoding="utf-8")  # noqa: SIM115 - kept open while it takes rows
            self.segments.append(last)
        return last

    def finished(self, page: bytes) -> bool:
        """The engine is done with ``page``: whether its lease waits for its
        segment's commit (it has rows in one not yet committed)."""
        with self.lock:
            segment = self.home.pop(page, None)
            if segment is None:
                return False
            segment.open_pages.discard(page)
            segment.held.append(page)
            return True

    def seal(self, roll_interval: float, max_size: int, everything: bool = False) -> None:
        """Seal the segment taking new pages when it is due (old or big enough),
        or whatever its age with ``everything`` (an idle or closing node)."""
        with self.lock:
            for segment in self.segments:
                if segment.sealed or not segment.rows:
                    continue
                age = time.monotonic() - segment.opened
                if everything or age >= roll_interval or segment.size >= max_size:
                    segment.sealed = True

    def ready(self) -> list[Segment]:
        """Sealed segments whose pages are all finished, not yet committing."""
        with self.lock:
            return [s for s in self.segments
                    if s.sealed and s.state == "open" and not s.open_pages]  # fmt: skip

    def held(self) -> list[bytes]:
        with self.lock:
            return [page for segment in self.segments for page in segment.held]

    def unfinished(self, segment: Segment) -> list[bytes]:
        """The pages of ``segment`` the engine never finished (a closing node):
        their rows stay out of its file, their leases go back to the crawl."""
        with self.lock:
            pages = list(segment.open_pages)
            for page in pages:
                self.home.pop(page, None)
            segment.open_pages.clear()
            return pages

    def done(self, segment: Segment) -> None:
        """Published: its rows are in its file."""
        with self.lock:
            if segment.out is not None:
                segment.out.close()
                segment.out = None
            segment.path.unlink(missing_ok=True)
            if segment in self.segments:
                self.segments.remove(segment)

    def orphans(self) -> Iterator[tuple[Path, IO[str]]]:
        """The spools of this spider on this disk that no running node holds,
        each locked while the caller takes it over."""
        if not self.root.is_dir():
            return
        for directory in sorted(self.root.iterdir()):
            if directory == self.node_dir or not directory.is_dir():
                continue
            lock = _take_lock(directory)
            if lock is None:
                continue  # a running node's
            yield directory, lock

    @staticmethod
    def segment_files(directory: Path) -> list[Path]:
        return sorted(directory.glob(f"*{SEGMENT_SUFFIX}"))

    @staticmethod
    def forget(directory: Path, lock: IO[str]) -> None:
        """An orphan spool taken over whole: gone."""
        lock.close()
        shutil.rmtree(directory, ignore_errors=True)


def segment_id_of(path: Path) -> str:
    return path.name[: -len(SEGMENT_SUFFIX)]


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:120] or "node"


def _take_lock(directory: Path) -> IO[str] | None:
    """The spool's lock, or None when a running process holds it."""
    try:
        handle = open(directory / "lock", "a")  # noqa: SIM115 - held while the spool is ours
    except OSError:
        return None
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        return None
    return handle
