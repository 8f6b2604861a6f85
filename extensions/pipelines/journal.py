"""The MongoDB store's spill journal: batches MongoDB could not take yet, on disk."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Any

import bson


class Journal:
    """Batches MongoDB could not take yet, as BSON files in one folder.

    A file is written to a temporary name, fsync'ed and renamed, so a file that
    exists is complete. Replaying claims a file by renaming it first, so two
    nodes of one machine never replay the same file.
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
        claimed = path.with_name(f".{path.name}.replaying-{self.node_id}")
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
            claimed.unlink()
        else:  # back for a later replay
            original = claimed.name.split(".replaying-")[0].lstrip(".")
            claimed.rename(claimed.with_name(original))

    def reclaim_abandoned(self) -> None:
        """Files a dead process was replaying go back to the pending ones."""
        if not self.directory.is_dir():
            return
        for claimed in self.directory.glob(".*.replaying-*"):
            self.release(claimed, done=False)
