"""API keys: a call's ``Authorization: Bearer KEY`` against ``API_KEYS``, each
entry a key or, as it is better kept at rest, its ``sha256:HEX`` hash (``scrapy
api --new-key`` prints both); and each key's calls a minute, counted in Redis
so that every API server of the cluster holds one limit."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import redis

    from extensions.keys import SpiderKeys

HASHED = "sha256:"
KEY_PREFIX = "fc-"  # as Firecrawl's keys look, which some tools check for


def key_hash(key: str) -> str:
    return HASHED + hashlib.sha256(key.encode()).hexdigest()


def new_key() -> tuple[str, str]:
    """A fresh key and the hash to put in API_KEYS."""
    key = KEY_PREFIX + secrets.token_hex(24)
    return key, key_hash(key)


class ApiKeys:
    def __init__(self, entries: list[str]):
        #: the hash of every key taken (a plain entry is hashed here)
        self.hashes = [e if e.startswith(HASHED) else key_hash(e) for e in entries]

    def identify(self, authorization: str | None) -> str | None:
        """The hash of the key a call brings, or None when it brings none taken."""
        if not authorization or not authorization.startswith("Bearer "):
            return None
        given = key_hash(authorization[7:].strip())
        found = None
        for known in self.hashes:  # every entry compared, in constant time each
            if hmac.compare_digest(known, given):
                found = known
        return found


class RateLimit:
    def __init__(self, server: redis.Redis, keys: SpiderKeys, per_minute: int):
        self.server = server
        self.keys = keys
        self.per_minute = per_minute

    def take(self, key_hash_: str, now: float | None = None) -> float:
        """0 when a call of this key may go now, else the seconds until it may."""
        moment = now if now is not None else time.time()
        minute = int(moment // 60)
        counter = self.keys.named("api_rate", key=f"{key_hash_[len(HASHED) :][:16]}:{minute}")
        pipe = self.server.pipeline(transaction=True)
        pipe.incr(counter)
        pipe.expire(counter, 120)
        calls, _ = pipe.execute()
        if int(calls) <= self.per_minute:
            return 0.0
        return 60 - moment % 60
