"""Where WARC files are kept: ``WARC_DIR``, a local directory, or an S3 bucket
(``s3://BUCKET/PREFIX``, any S3-compatible store, through boto3).

With S3 a node writes its files in ``WARC_SPOOL_DIR`` on its own disk (synced
there before its leases are released, as in a local directory) and uploads
each file and its index when it is closed: at ``WARC_MAX_SIZE``, when the node
stops. A node killed with its files in the spool leaves them to the next node
started on that spool, which uploads them first (files whose writer process is
gone, or has this process's pid: a restarted container).
boto3 finds the credentials, region and endpoint as the AWS tools do
(``AWS_ACCESS_KEY_ID``, ``AWS_DEFAULT_REGION``, ``AWS_ENDPOINT_URL_S3``, ...).

Readers (``scrapy warc lookup``, ``scrapy reparse``) list the spider's files
and read each through ``fetch``: the file itself, or a copy downloaded from S3
(at most ``CACHED_FILES`` copies on disk at once).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
from collections import OrderedDict
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from extensions.exceptions import ConfigError

logger = logging.getLogger(__name__)

CACHED_FILES = 3
# SPIDER-STAMP-NODE-PID-SEQ.warc.gz (files.py)
WRITER_PID = re.compile(r"-(\d+)-\d+\.warc\.gz$")


def of_spider(name: str, spider: str) -> bool:
    """Whether a file name is one of ``spider``'s (not of a spider whose name
    starts with it: ``shop-extra``)."""
    return re.match(rf"{re.escape(spider)}-\d{{14}}-", name) is not None


def location_problem(where: str) -> str | None:
    """Why a WARC_DIR cannot be used, or None."""
    if "://" not in where:
        return None
    parts = urlsplit(where)
    if parts.scheme != "s3":
        return f"a {parts.scheme}:// URL; a directory or s3://BUCKET/PREFIX is needed"
    if not parts.netloc:
        return "names no bucket (s3://BUCKET/PREFIX)"
    return None


class LocalArchive:
    def __init__(self, directory: Path):
        self.directory = directory
        self.writes_to = directory

    def __str__(self) -> str:
        return str(self.directory)

    def on_closed(self, path: Path) -> None:
        """A file the writer closed: already where it belongs."""

    def leftovers(self, spider: str) -> int:
        return 0

    def names(self, spider: str, suffix: str = ".warc.gz") -> list[str]:
        if not self.directory.is_dir():
            return []
        found = (path.name for path in self.directory.glob(f"{spider}-*{suffix}"))
        return sorted(name for name in found if of_spider(name, spider))

    def fetch(self, name: str) -> Path | None:
        path = self.directory / name
        return path if path.exists() else None

    def read_range(self, name: str, offset: int, length: int) -> bytes | None:
        """``length`` bytes of a file from ``offset`` (one record), or None when
        this machine does not have the file (another node's own directory)."""
        try:
            with (self.directory / name).open("rb") as stream:
                stream.seek(offset)
                data = stream.read(length)
        except OSError:
            return None
        return data if len(data) == length else None

    def close(self) -> None:
        pass


class S3Archive:
    def __init__(self, url: str, spool: Path, client: Any = None):
        parts = urlsplit(url)
        self.url = url
        self.bucket = parts.netloc
        self.prefix = parts.path.strip("/") + "/" if parts.path.strip("/") else ""
        self.writes_to = spool
        self.client = client or s3_client()
        self._cache: OrderedDict[str, Path] = OrderedDict()
        self._cache_dir: Path | None = None

    def __str__(self) -> str:
        return self.url

    # --- writing -----------------------------------------------------------------

    def on_closed(self, path: Path) -> None:
        """Upload a closed file and its index, then drop them from the spool;
        on failure they stay there for the next node on this spool. Blocking:
        run it in a thread."""
        index = Path(f"{path}.cdxj")
        try:
            for local in (index, path):  # the file last: its presence means both are in
                if local.exists():
                    self.client.upload_file(str(local), self.bucket, self.prefix + local.name)
        except Exception as exc:  # boto3's errors, a network that went away
            logger.error("could not upload %s to %s (it stays in %s): %s",
                         path.name, self.url, self.writes_to, exc)  # fmt: skip
            return
        for local in (path, index):
            local.unlink(missing_ok=True)
        logger.info("uploaded %s to %s", path.name, self.url)

    def leftovers(self, spider: str) -> int:
        """Upload the spool's files whose writer is gone (killed); how many."""
        uploaded = 0
        for path in sorted(self.writes_to.glob(f"{spider}-*.warc.gz")):
            match = WRITER_PID.search(path.name)
            if match is None or not of_spider(path.name, spider):
                continue
            writer = int(match[1])
            # this process has written nothing yet: a file of its pid is a former
            # process's (a container restarted: pids start over)
            if writer != os.getpid() and _alive(writer):
                continue
            self.on_closed(path)
            uploaded += not path.exists()
        return uploaded

    # --- reading -----------------------------------------------------------------

    def names(self, spider: str, suffix: str = ".warc.gz") -> list[str]:
        found = []
        pages = self.client.get_paginator("list_objects_v2")
        for page in pages.paginate(Bucket=self.bucket, Prefix=f"{self.prefix}{spider}-"):
            for entry in page.get("Contents", []):
                name = entry["Key"][len(self.prefix) :]
                if name.endswith(suffix) and "/" not in name and of_spider(name, spider):
                    found.append(name)
        return sorted(found)

    def fetch(self, name: str) -> Path | None:
        if name in self._cache:
            self._cache.move_to_end(name)
            return self._cache[name]
        if self._cache_dir is None:
            self._cache_dir = Path(tempfile.mkdtemp(prefix="warc-"))
        local = self._cache_dir / name
        try:
            self.client.download_file(self.bucket, self.prefix + name, str(local))
        except Exception as exc:  # not there (an index never uploaded), or S3 away
            logger.warning("could not read %s from %s: %s", name, self.url, exc)
            return None
        self._cache[name] = local
        while len(self._cache) > CACHED_FILES:
            _, old = self._cache.popitem(last=False)
            old.unlink(missing_ok=True)
        return local

    def read_range(self, name: str, offset: int, length: int) -> bytes | None:
        """One record of an uploaded file, by a ranged GET; None when it is not
        there (still in a node's spool) or S3 does not answer."""
        try:
            span = f"bytes={offset}-{offset + length - 1}"
            answer = self.client.get_object(Bucket=self.bucket, Key=self.prefix + name, Range=span)
            data = answer["Body"].read()
        except Exception as exc:  # boto3's errors, a network that went away
            logger.info("could not read %s from %s: %s", name, self.url, exc)
            return None
        return data if len(data) == length else None

    def close(self) -> None:
        if self._cache_dir is not None:
            shutil.rmtree(self._cache_dir, ignore_errors=True)
            self._cache_dir = None
            self._cache.clear()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def s3_client() -> Any:
    """boto3's S3 client: its upload_file and download_file (s3transfer) do the
    multipart uploads and ranged downloads of big files."""
    try:
        import boto3.session
    except ImportError:
        raise ConfigError("WARC_DIR = s3://... needs boto3 (pip install boto3)") from None
    session = boto3.session.Session()
    return session.client("s3", region_name=session.region_name or "us-east-1")


def archive_for(settings: Any) -> LocalArchive | S3Archive:
    """The archive ``WARC_DIR`` names. Raises ConfigError."""
    where = str(settings.get("WARC_DIR"))
    problem = location_problem(where)
    if problem:
        raise ConfigError(f"WARC_DIR = {where!r}: {problem}")
    if where.startswith("s3://"):
        return S3Archive(where, Path(settings.get("WARC_SPOOL_DIR")))
    return LocalArchive(Path(where))
