"""What a map adds to what a site lists: the URLs of its host the cluster
already knows, read within bounds so that a map costs the same however big the
crawl: those queued for the host in the frontier (the crawl without an id: an
HSCAN of ``NAME:data:GROUP``, at most QUEUED_READ entries) and those the archive
captured (the CDXJ index beside the API spider's newest WARC files, at most
ARCHIVE_FILES of them)."""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from extensions.frontier.groups import group_for
from extensions.warc.files import surt

if TYPE_CHECKING:
    from extensions.keys import SpiderKeys
    from extensions.warc.storage import LocalArchive, S3Archive

logger = logging.getLogger(__name__)

#: queued requests of the host read at most
QUEUED_READ = 10_000
#: the newest WARC files whose index a map reads at most
ARCHIVE_FILES = 20
#: bytes of one index read at most
INDEX_READ = 64_000_000
INDEX = ".warc.gz.cdxj"


def _host_key(url: str) -> str:
    return surt(url).split(")", 1)[0]


class KnownUrls:
    def __init__(self, server: Any, keys: SpiderKeys, spider: str, queue_by: str,
                 archive: LocalArchive | S3Archive | None) -> None:  # fmt: skip
        self.server = server
        self.keys = keys
        self.spider = spider
        self.queue_by = queue_by
        self.archive = archive

    def urls(self, url: str, subdomains: bool, limit: int) -> list[str]:
        """Up to ``limit`` URLs of ``url``'s host (and its subdomains) the
        frontier has queued or the archive holds. Raises redis.RedisError."""
        base = _host_key(url)

        def ours(candidate: Any) -> bool:
            if not isinstance(candidate, str) or not candidate.startswith(("http://", "https://")):
                return False
            host = _host_key(candidate)
            return host == base or (subdomains and host.startswith(base + ","))

        found: dict[str, None] = {}
        if self.queue_by != "slot":
            data = self.keys.data(group_for(url, by=self.queue_by))
            for n, (_, raw) in enumerate(self.server.hscan_iter(data, count=500)):
                if n >= QUEUED_READ or len(found) >= limit:
                    break
                try:
                    candidate = json.loads(raw).get("url")
                except (ValueError, AttributeError):
                    continue  # not a request a node queued
                if ours(candidate):
                    found[candidate] = None
        if self.archive is not None and len(found) < limit:
            self._archived(base, ours, found, limit)
        return list(found)[:limit]

    def _archived(self, base: str, ours: Any, found: dict[str, None], limit: int) -> None:
        assert self.archive is not None
        try:
            names = self.archive.names(self.spider, INDEX)[-ARCHIVE_FILES:]
        except Exception as exc:  # S3 away: the map answers what it has
            logger.warning("the archive's index could not be listed: %s", exc)
            return
        # an index line starts with its URL's SURT: the host's own, or a subdomain's
        prefixes = (f"{base})".encode(), f"{base},".encode())
        for name in reversed(names):
            path = self.archive.fetch(name)
            if path is None:
                continue
            try:
                with path.open("rb") as stream:
                    read = 0
                    for line in stream:
                        read += len(line)
                        if read > INDEX_READ:
                            break
                        if not line.startswith(prefixes):
                            continue
                        try:
                            candidate = json.loads(line.split(b" ", 2)[2]).get("url")
                        except (ValueError, IndexError, AttributeError):
                            continue  # a line no writer of ours wrote
                        if ours(candidate):
                            found[candidate] = None
                            if len(found) >= limit:
                                return
            except OSError:
                continue
