"""Where scopes live for the cluster: ``NAME:scope``, one hash.

Fields: a crawl id (``""`` for the crawl without one) -> its scope document;
``seed:ID`` -> a seed's own scope document (ID is the document's digest: a
million seeds with one scope share one field); ``#version`` -> bumped at every
change, so a node reads the documents again only when one changed;
``#since:CRAWL`` -> when the crawl was first given a scope (``max_seconds``).

``NAME:scope_counts`` holds what the nodes counted, per crawl:
``CRAWL|pages`` and ``CRAWL|bytes`` fetched (for the limits) and
``CRAWL|REASON`` refused.
"""

from __future__ import annotations

import hashlib
import logging
from typing import TYPE_CHECKING

from extensions import clock
from extensions.connection import text
from extensions.scope.document import Scope, ScopeError, parse

if TYPE_CHECKING:
    import redis

    from extensions.keys import SpiderKeys

logger = logging.getLogger(__name__)

VERSION = "#version"
SEED = "seed:"


def seed_doc_id(scope: Scope) -> str:
    return hashlib.sha1(scope.to_json().encode()).hexdigest()[:16]


def count_field(crawl: str, what: str) -> str:
    return f"{crawl}|{what}"


def since_field(crawl: str) -> str:
    """When the crawl was first given a scope (ms): ``max_seconds`` counts from it."""
    return f"#since:{crawl}"


class ScopeStore:
    def __init__(self, server: redis.Redis, keys: SpiderKeys):
        self.server = server
        self.key = keys.named("scope")
        self.counts_key = keys.named("scope_counts")
        self.hosts_key = keys.named("scope_hosts")

    def crawl_scope(self, crawl: str) -> Scope | None:
        raw = self.server.hget(self.key, crawl)
        return None if raw is None else parse(raw)

    def set_crawl_scope(self, crawl: str, scope: Scope | None) -> None:
        """The crawl's scope, for the cluster at once (None: none)."""
        pipe = self.server.pipeline(transaction=True)
        if scope is None:
            pipe.hdel(self.key, crawl)
        else:
            pipe.hset(self.key, crawl, scope.to_json())
            pipe.hsetnx(self.key, since_field(crawl), clock.now_ms())
        pipe.hincrby(self.key, VERSION, 1)
        pipe.execute()

    def add_seed_scope(self, scope: Scope) -> str:
        """Store a seed's scope (once for any number of seeds); its id."""
        doc = seed_doc_id(scope)
        if self.server.hsetnx(self.key, SEED + doc, scope.to_json()):
            self.server.hincrby(self.key, VERSION, 1)
        return doc

    def version(self) -> int:
        raw = self.server.hget(self.key, VERSION)
        try:
            return int(raw or 0)
        except ValueError:
            return -1

    def read_all(self) -> tuple[dict[str, Scope], list[str]]:
        """Every document, by field; and what was wrong with the ones that
        cannot be read (another node, or a person, may have written anything)."""
        scopes: dict[str, Scope] = {}
        problems: list[str] = []
        for field, raw in self.server.hgetall(self.key).items():
            name = text(field)
            if name.startswith("#"):
                continue
            try:
                scopes[name] = parse(raw)
            except ScopeError as exc:
                problems.append(f"{self.key} field {name!r:.80}: {exc}")
        return scopes, problems

    def counts(self, crawl: str) -> dict[str, int]:
        """What the nodes counted for ``crawl`` (pages, bytes, refusals)."""
        found: dict[str, int] = {}
        prefix = count_field(crawl, "")
        for field, value in self.server.hgetall(self.counts_key).items():
            name = text(field)
            if name.startswith(prefix):
                try:
                    found[name[len(prefix) :]] = int(value)
                except ValueError:
                    continue
        return found
