"""The MongoDB store's spill journal: batches MongoDB could not take yet, on disk."""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from pathlib import Path
from typing import Any

import bson


class Journal:
    """Batches MongoDB could not take yet, as BSON files in one folder.

    A file is written to a temporary name, fsync'ed and renamed, so a file that
    exists is complete. Replaying claims a file by renaming it first, with the
    claiming process's id, so two nodes of one machine never replay the same file,
    and a claim goes back to the pending files only once its process is gone.
    """

    def __init__(self, directory: Path, node_id: str):
        self.directory = directory
        self.node_id = node_id

    def spill(self, documents: list[dict[str, Any]]) -> Path:
        self.directory.mkdir(parents=True, exist_ok=True)
        name = f"{time.time():.6f}-{self.node_id}-{uuid.uuid4().hex[:8]}.bson"
        tmp = self.directory / f".{name}.tmp"
        with open(tmp, "wb") as out:
            for doc in documents:
                out.write(bson.encode(doc))
            out.flush()
            os.fsync(out.fileno())
        final = self.directory / name
        tmp.rename(final)
        return final

    def pending(self) -> list[Path]:
        if not self.directory.is_dir():
            return []
        return sorted(self.directory.glob("*.bson"))

    def claim(self, path: Path) -> Path | None:
        claimed = path.with_name(f".{path.name}.replaying-{self.node_id}-{os.getpid()}")
        try:
            path.rename(claimed)
        except FileNotFoundError:  # another node of this machine took it
            return None
        return claimed

    @staticmethod
    def read(path: Path) -> list[dict[str, Any]]:
        with open(path, "rb") as stream:
            return list(bson.decode_file_iter(stream))

    def release(self, claimed: Path, done: bool) -> None:
        if done:
            claimed.unlink(missing_ok=True)
        else:  # back for a later replay
            original = claimed.name.split(".replaying-")[0].lstrip(".")
            with contextlib.suppress(FileNotFoundError):  # put back by another already
                claimed.rename(claimed.with_name(original))

    def reclaim_abandoned(self) -> None:
        """Files a dead process was replaying go back to the pending ones (a
        live node of this machine keeps what it is replaying)."""
        if not self.directory.is_dir():
            return
        for claimed in self.directory.glob(".*.replaying-*"):
            if not _claimer_alive(claimed):
                self.release(claimed, done=False)


def _claimer_alive(claimed: Path) -> bool:
    """Whether another process that claimed the file still runs (a claim named
    without a process id, as earlier versions named them, counts as dead; so
    does this process's own, left by a crawl before this one)."""
    pid = claimed.name.rpartition("-")[2]
    if not pid.isdigit() or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True
