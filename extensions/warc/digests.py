"""The payloads the crawl archived, for revisit records: a response whose payload
the crawl already has is written as a ``revisit`` record that refers to the
first (WARC/1.1's identical-payload-digest profile), whichever node archived it.

``NAME:warc_digests:BUCKET`` hashes (65,536 buckets by the digest's first two
bytes, each a small listpack): the digest's other 18 bytes -> the first record's
URL, date, id and place in its file (a JSON object, about 200 bytes). One round
trip a page (an HGET); a new payload's HSETNX waits for the node's next flush,
one pipeline for all of them, which also reads ``NAME:warc_digests:count``.

Redis holds at most ``WARC_DIGESTS_IN_REDIS`` payloads. Past that, with
``MONGO_URI``, the index grows in MongoDB (collection ``NAME_warc_digests``,
``_id`` the digest; first writer wins as with HSETNX) and a payload Redis does not
know is looked for there too; without MongoDB a new payload is archived in full
and not entered (``warc/digests_not_entered``).
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

URL_KEPT = 2000  # characters of the first record's URL kept
#: a first record's URL, date and id; and where it lies (file, offset, length),
#: which a revisit's capture points to (``captures.py``)
FIELDS = ("u", "d", "r", "f", "o", "l")
# payloads waiting for their records' sync: more (Redis away a long time) are
# archived in full without being entered, rather than held in memory
MAX_UNPUBLISHED = 10_000


def payload_digest(body: bytes) -> str:
    """The WARC-Payload-Digest warcio writes: ``sha1:`` and the base32 SHA-1."""
    return "sha1:" + base64.b32encode(hashlib.sha1(body).digest()).decode()


class PayloadIndex:
    """The crawl's digest index, as one node reads and adds to it.

    A payload is entered only once its record is on disk (``publish``, called
    after the node's WARC files are synced, before its leases are released): a
    revisit never refers to a record a killed node did not keep. Two nodes that
    archive one payload before either publishes both write it in full.
    """

    def __init__(self, server: Any, prefix: str, most_in_redis: int, beyond: Any = None):
        self.server = server
        self.prefix = prefix
        self.count_key = f"{prefix}count"
        self.most_in_redis = most_in_redis
        self.beyond = beyond  # a pymongo collection, or None
        # Redis holds its share (as the last publish saw): new payloads go beyond it
        self.full: bool | None = None
        self.bad_records = 0  # stored values no node writes, since the last look
        self.not_entered = 0  # payloads past Redis's share with nowhere to go
        # (key, field) -> (value, replace, digest)
        self._new: dict[tuple[str, bytes], tuple[str, bool, str]] = {}
        # the payload the last ``first`` found new, until its record is written (``kept``)
        self._candidate: tuple[tuple[str, bytes], tuple[str, bool, str]] | None = None

    def _where(self, digest: str) -> tuple[str, bytes]:
        raw = base64.b32decode(digest.removeprefix("sha1:"))
        return f"{self.prefix}{raw[:2].hex()}", raw[2:]

    def first(self, digest: str, url: str, date: str, record_id: str) -> dict[str, str] | None:
        """The first record of this payload (``u``, ``d``, ``r``), or None when
        this one is to be the first (entered at the next ``publish`` once
        ``kept`` says its record was written). Raises redis.RedisError."""
        self._candidate = None
        where = self._where(digest)
        if where in self._new:  # archived here since the last publish: earlier in
            return dict(json.loads(self._new[where][0]))  # this node's files, synced with it
        if self.full is None:  # a node's first look: from then on, each publish says
            self.full = int(self.server.get(self.count_key) or 0) >= self.most_in_redis
        stored = self.server.hget(*where)
        if stored is None and self.full and self.beyond is not None:
            stored = self._beyond(digest)
        replace = False
        if stored is not None:
            try:
                original = json.loads(stored)
                if all(isinstance(original.get(name), str) for name in ("u", "d", "r")):
                    return {name: original[name] for name in FIELDS if name in original}
            except (TypeError, ValueError):
                pass
            self.bad_records += 1  # another writer's value: replaced by this record
            replace = True
        value = json.dumps({"u": url[:URL_KEPT], "d": date, "r": record_id})
        self._candidate = (where, (value, replace, digest))
        return None

    def _beyond(self, digest: str) -> str | None:
        """The first record of ``digest`` as MongoDB has it, in Redis's form.
        Raises pymongo's errors."""
        document = self.beyond.find_one({"_id": digest})
        if document is None:
            return None
        return json.dumps({name: document[name] for name in FIELDS if name in document})

    def kept(self, location: tuple[str, int, int] | None = None) -> None:
        """The record ``first`` last found new is in the node's file, at
        ``location`` (file, offset, length)."""
        if self._candidate is not None and len(self._new) < MAX_UNPUBLISHED:
            where, (value, replace, digest) = self._candidate
            if location is not None:
                value = json.dumps({**json.loads(value), **dict(zip("fol", location, strict=True))})
            self._new[where] = (value, replace, digest)
        self._candidate = None

    def publish(self) -> int:
        """Enter the payloads archived since the last call (their records are on
        disk now); how many. Raises redis.RedisError (or pymongo's errors) and
        keeps them for the next."""
        if not self._new:
            return 0
        if self.full:
            self._publish_beyond()
        else:
            pipe = self.server.pipeline(transaction=False)
            for (key, field), (value, replace, _) in self._new.items():
                if replace:
                    pipe.hset(key, field, value)
                else:
                    pipe.hsetnx(key, field, value)
            pipe.get(self.count_key)
            *answers, count = pipe.execute()
            created = sum(1 for answer in answers if answer)
            if created:
                count = self.server.incrby(self.count_key, created)
            self.full = int(count or 0) >= self.most_in_redis
        count = len(self._new)
        self._new.clear()
        return count

    def _publish_beyond(self) -> None:
        if self.beyond is None:
            self.not_entered += len(self._new)
            return
        from pymongo.errors import BulkWriteError

        documents = [{"_id": digest, **json.loads(value)}
                     for value, _, digest in self._new.values()]  # fmt: skip
        try:
            self.beyond.insert_many(documents, ordered=False)
        except BulkWriteError as exc:  # another node's first: it stays the first
            if any(error.get("code") != 11000 for error in exc.details.get("writeErrors", [])):
                raise
