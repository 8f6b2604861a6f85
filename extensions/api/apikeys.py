"""API keys: a call's ``Authorization: Bearer KEY`` against ``API_KEYS``, each
entry a key or, as it is better kept at rest, its ``sha256:HEX`` hash (``scrapy
api --new-key`` prints both); each key's calls a minute, counted in Redis so
that every API server of the cluster holds one limit; and each key's quota
(``API_KEY_QUOTAS``: its own calls a minute and pages a crawl)."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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


@dataclass(frozen=True)
class Quota:
    """What one key may do: calls a minute, pages a crawl (or a map) asks for."""

    rate_limit: int
    max_pages: int


def _hashed(entry: str) -> str:
    return entry if entry.startswith(HASHED) else key_hash(entry)


class ApiKeys:
    def __init__(self, entries: list[str], quotas: dict[str, dict[str, Any]], default: Quota):
        #: the hash of every key taken (a plain entry is hashed here)
        self.hashes = [_hashed(e) for e in entries]
        self.default = default
        #: API_KEY_QUOTAS: a key's own figures, by its hash
        self.quotas = {
            _hashed(entry): Quota(int(given.get("rate_limit", default.rate_limit)),
                                  int(given.get("max_pages", default.max_pages)))
            for entry, given in quotas.items()
        }  # fmt: skip

    def quota(self, hashed: str) -> Quota:
        return self.quotas.get(hashed, self.default)

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

    def take(
        self, key_hash_: str, now: float | None = None, per_minute: int | None = None
    ) -> float:
        """0 when a call of this key may go now (``per_minute`` its own limit,
        else API_RATE_LIMIT), else the seconds until it may."""
        moment = now if now is not None else time.time()
        minute = int(moment // 60)
        counter = self.keys.named("api_rate", key=f"{key_hash_[len(HASHED) :][:16]}:{minute}")
        pipe = self.server.pipeline(transaction=True)
        pipe.incr(counter)
        pipe.expire(counter, 120)
        calls, _ = pipe.execute()
        if int(calls) <= (per_minute or self.per_minute):
            return 0.0
        return 60 - moment % 60
