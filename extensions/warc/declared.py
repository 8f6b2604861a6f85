"""WARC capture, declared (``extensions/capability.py``): its settings, its key,
its frontier part and its middlewares; what each does: the package's modules."""

from __future__ import annotations

from typing import TYPE_CHECKING

from extensions.capability import Capability, Key, Setting
from extensions.settingchecks import flag, number
from extensions.warc.storage import location_problem

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings


def _location(settings: BaseSettings, name: str) -> str | None:
    return location_problem(str(settings.get(name)))


CAPABILITY = Capability(
    name="warc",
    about="WARC capture (extensions/warc/)",
    settings={
        "WARC_ENABLED": Setting(
            False, "every fetch's request, response and metadata into WARC/1.1 files", flag
        ),
        "WARC_DIR": Setting(
            "data/warc",
            "a local directory (shared or each node's own), or s3://BUCKET/PREFIX",
            _location,
        ),
        "WARC_SPOOL_DIR": Setting(
            "data/warc-spool", "with s3://: files being written, until uploaded"
        ),
        "WARC_MAX_SIZE": Setting(
            1_000_000_000, "bytes: a file is rotated past this", number(int, 1_000_000)
        ),
        "WARC_REVISITS": Setting(
            True, "a payload the crawl already archived: a revisit record (Redis index)", flag
        ),
        "WARC_DIGESTS_IN_REDIS": Setting(
            2_000_000,
            "payloads the revisit index keeps in Redis (about 200 bytes each); past it, "
            "with MONGO_URI, the index grows in MongoDB (NAME_warc_digests), else new "
            "payloads are archived in full without being entered",
            number(int, 0),
        ),
        "WARC_CAPTURES_IN_REDIS": Setting(
            2_000_000,
            "URLs whose newest capture Redis indexes (about 100 bytes each), which the "
            "API's maxAge and scrapy mcp answer from; past it no capture is entered (what "
            "the index lacks is fetched live); 0: no capture index",
            number(int, 0),
        ),
        "REPARSE_FOLLOW": Setting(
            False, "scrapy reparse --follow: links found go to the start list"
        ),
    },
    keys={
        "warc_digests": Key(
            "%(name)s:warc_digests:%(bucket)s",
            "hash",
            "WARC_ENABLED: 18 bytes of an archived payload's SHA-1 (its first 2 name the "
            "bucket) -> the first record of it (URL, date, id), for revisit records; the "
            '`count` "bucket": a string, how many are entered (at most WARC_DIGESTS_IN_REDIS)',
            "warc/middleware.py (each node, a page at a time)",
        ),
        "warc_captures": Key(
            "%(name)s:warc_captures:%(bucket)s",
            "hash",
            "WARC_ENABLED: 10 bytes of a URL's SHA-1 (the 2 before name the bucket) -> its "
            "newest capture (file, offset and length of its payload record, WARC-Date, "
            'status; JSON); the `count` "bucket": a string, how many are entered (at most '
            "WARC_CAPTURES_IN_REDIS)",
            "warc/middleware.py (each node, with its flushes)",
        ),
    },
    frontier_parts={"extensions.warc.part.WarcPart": 700},
    downloader_middlewares={
        # next to the downloader: the request as sent, the response as received
        "extensions.warc.middleware.WarcMiddleware": 960,
        # what it could not archive goes back to the frontier, after the answer is counted
        "extensions.warc.middleware.ParkUnarchived": 545,
    },
)
