"""The payloads the crawl archived, for revisit records: a response whose payload
the crawl already has is written as a ``revisit`` record that refers to the
first (WARC/1.1's identical-payload-digest profile), whichever node archived it.

``NAME:warc_digests:BUCKET`` hashes (65,536 buckets by the digest's first two
bytes, each a small listpack): the digest's other 18 bytes -> the first record's
URL, date and id (a JSON object, about 150 bytes). One round trip a page: an
HSETNX and an HGET in one pipeline.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

URL_KEPT = 2000  # characters of the first record's URL kept


def payload_digest(body: bytes) -> str:
    """The WARC-Payload-Digest warcio writes: ``sha1:`` and the base32 SHA-1."""
    return "sha1:" + base64.b32encode(hashlib.sha1(body).digest()).decode()


class PayloadIndex:
    def __init__(self, server: Any, prefix: str):
        self.server = server
        self.prefix = prefix
        self.bad_records = 0  # stored values no node writes, since the last look

    def first(self, digest: str, url: str, date: str, record_id: str) -> dict[str, str] | None:
        """The first record of this payload (``u``, ``d``, ``r``), or None when
        this one is the first (and now recorded). Raises redis.RedisError."""
        raw = base64.b32decode(digest.removeprefix("sha1:"))
        key, field = f"{self.prefix}{raw[:2].hex()}", raw[2:]
        mine = json.dumps({"u": url[:URL_KEPT], "d": date, "r": record_id})
        pipe = self.server.pipeline(transaction=False)
        pipe.hsetnx(key, field, mine)
        pipe.hget(key, field)
        created, stored = pipe.execute()
        if created:
            return None
        try:
            original = json.loads(stored)
            if not all(isinstance(original.get(name), str) for name in ("u", "d", "r")):
                raise ValueError("not a record")
        except (TypeError, ValueError):
            # another writer's value: this page is archived in full, and is the first now
            self.bad_records += 1
            self.server.hset(key, field, mine)
            return None
        return {name: original[name] for name in ("u", "d", "r")}
