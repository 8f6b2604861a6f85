"""A committed segment made a Parquet file and put where ``PARQUET_URI`` says: a
directory (``DIR/SPIDER/NAME.parquet``, written beside under a dot name, synced,
then renamed) or ``s3://BUCKET/PREFIX`` (``PREFIX/SPIDER/NAME.parquet``, uploaded
with boto3 as the WARC files are). The file's name comes from its segment, so a
segment published twice (a node killed between the upload and forgetting its
spool) is one file written twice with the same rows, never two files.

Columns: ``_id``, ``_crawl`` and ``_fetched_at`` first, then every field the
crawl's schema knows (``schema.py``), in name order: a field a row lacks is null.
"""

from __future__ import annotations

import base64
import logging
import os
import shutil
from collections.abc import Collection
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from extensions.pipelines.parquet.spool import read_rows

logger = logging.getLogger(__name__)

FIRST_COLUMNS = {"_id": "string", "_crawl": "string", "_fetched_at": "timestamp"}


def arrow_type(kind: str) -> Any:
    import pyarrow as pa

    return {
        "string": pa.string(),
        "json": pa.string(),
        "int64": pa.int64(),
        "double": pa.float64(),
        "bool": pa.bool_(),
        "timestamp": pa.timestamp("us", tz="UTC"),
        "binary": pa.binary(),
    }[kind]


def column(values: list[Any], kind: str) -> Any:
    import pyarrow as pa

    if kind == "timestamp":
        return pa.array(values, pa.int64()).cast(pa.timestamp("us", tz="UTC"))
    if kind == "binary":
        values = [None if v is None else base64.b64decode(v) for v in values]
    return pa.array(values, arrow_type(kind))


def build(segment: Path, types: dict[str, str], leave_out: Collection[str], out: Path) -> int:
    """Write the rows of ``segment`` (less those of the pages ``leave_out`` names)
    to the Parquet file ``out``, synced; how many rows it holds."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    left_out = frozenset(leave_out)
    rows = [row for page, row in read_rows(segment) if page not in left_out]
    kinds = dict(FIRST_COLUMNS)
    for name in sorted(set(types) | {name for row in rows for name in row}):
        if name not in kinds:
            kinds[name] = types.get(name, "json")
    arrays, names = [], []
    for name, kind in kinds.items():
        values = [row.get(name) for row in rows]
        if kind == "double":
            values = [None if v is None else float(v) for v in values]
        arrays.append(column(values, kind))
        names.append(name)
    table = pa.Table.from_arrays(arrays, names=names)
    tmp = out.with_name(f".{out.name}.tmp")
    pq.write_table(table, tmp, compression="zstd")
    _sync(tmp)
    os.replace(tmp, out)
    return len(rows)


def rows_in(built: Path) -> int:
    import pyarrow.parquet as pq

    return int(pq.read_metadata(built).num_rows)


def _sync(path: Path) -> None:
    with open(path, "rb") as written:
        os.fsync(written.fileno())


class LocalFiles:
    def __init__(self, directory: Path, spider: str):
        self.directory = directory / spider

    def __str__(self) -> str:
        return str(self.directory)

    def put(self, built: Path, name: str) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        final = self.directory / name
        tmp = self.directory / f".{name}.tmp"
        shutil.copyfile(built, tmp)
        _sync(tmp)
        os.replace(tmp, final)


class S3Files:
    def __init__(self, url: str, spider: str, client: Any = None):
        from extensions.warc.storage import s3_client

        parts = urlsplit(url)
        self.url = url
        self.bucket = parts.netloc
        prefix = parts.path.strip("/")
        self.prefix = f"{prefix}/{spider}/" if prefix else f"{spider}/"
        self.client = client or s3_client()

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    def put(self, built: Path, name: str) -> None:
        self.client.upload_file(str(built), self.bucket, self.prefix + name)


def files_for(where: str, spider: str) -> LocalFiles | S3Files:
    if where.startswith("s3://"):
        return S3Files(where, spider)
    return LocalFiles(Path(where), spider)
