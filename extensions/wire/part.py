"""The wire's frontier part: each heartbeat adds what this node's TLS
connections did to their hosts' hashes (``tls_c``, ``tls_h``, ``tls_r`` in
NAME:host:HOST, in its shard), and the node's totals to its record; ``scrapy
status`` shows both."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import redis

from extensions.frontier.part import FrontierPart
from extensions.wire.handlers import policy_for
from extensions.wire.tls import HOST_FIELDS

if TYPE_CHECKING:
    from extensions.frontier.context import PartContext

logger = logging.getLogger(__name__)


def _count(raw: Any) -> int:
    """A count another writer left in a node's record (anything: 0 if not a number)."""
    try:
        return max(int(float(raw or 0)), 0)
    except (TypeError, ValueError, OverflowError):
        return 0


class WirePart(FrontierPart):
    def __init__(self, context: PartContext):
        self.server = context.server
        self.keys = context.keys
        self.health = context.health
        self.ledger = policy_for(context.crawler).ledger

    @classmethod
    def from_context(cls, context: PartContext) -> WirePart:
        return cls(context)

    @classmethod
    def node_status(cls, record: dict[str, str]) -> dict[str, Any]:
        return {name: _count(record.get(f"tls_{name}")) for name in HOST_FIELDS}

    @classmethod
    def node_notes(cls, row: dict[str, Any]) -> list[str]:
        if not row.get("connections"):
            return []
        return [f"TLS {row['connections']} connections, {row['handshakes']} handshakes, "
                f"{row['resumed']} resumed"]  # fmt: skip

    def checkpoint(self) -> dict[str, Any]:
        return {f"tls_{name}": self.ledger.totals[name] for name in HOST_FIELDS}

    def heartbeat(self) -> None:
        pending = self.ledger.take()
        if not pending:
            return
        pipe = self.server.pipeline(transaction=False)
        for host, counts in pending.items():
            key = self.keys.shard(self.keys.shard_of(host)).host(host)
            for what, n in counts.items():
                pipe.hincrby(key, HOST_FIELDS[what], n)
        try:
            pipe.execute()
        except redis.RedisError as exc:  # figures for a person: the next beat's go
            self.health.failed(exc)
            logger.debug("TLS counts of %d hosts not written: %s", len(pending), exc)
