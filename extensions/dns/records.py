"""What the cluster keeps of a host's DNS answer in Redis (``NAME:dns:HOST``).

A record is JSON: ``{"a": ["192.0.2.1", ...]}`` for the addresses a host has, or
``{"error": "NXDOMAIN"}`` for a name that does not exist, or ``{"pending": 1}``
while the node that claimed the name resolves it; Redis expires it with the
answer's TTL (a claim with the DNS timeout). Another node, or anyone who can
write to Redis, may have written it: ``parse`` takes only a well-formed record
and says None otherwise.
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass

NXDOMAIN = "NXDOMAIN"
PENDING = json.dumps({"pending": 1})
MAX_ADDRESSES = 32  # addresses kept of one answer
MAX_RECORD_BYTES = 4096


@dataclass(frozen=True)
class Answer:
    """A host's addresses (IPv4 first), or the error that it has none."""

    addresses: tuple[str, ...] = ()
    error: str | None = None
    #: another node claimed the name and is resolving it
    pending: bool = False

    def dumps(self) -> str:
        if self.error:
            return json.dumps({"error": self.error})
        return json.dumps({"a": list(self.addresses[:MAX_ADDRESSES])})


def parse(raw: bytes | str | None) -> Answer | None:
    """The answer a record holds, or None: absent, or not a record this
    version writes (not JSON, not an object, an address that is not one)."""
    if raw is None or len(raw) > MAX_RECORD_BYTES:
        return None
    try:
        record = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(record, dict):
        return None
    if record.get("error") == NXDOMAIN and "a" not in record:
        return Answer(error=NXDOMAIN)
    if record == {"pending": 1}:
        return Answer(pending=True)
    addresses = record.get("a")
    if not isinstance(addresses, list) or not 0 < len(addresses) <= MAX_ADDRESSES:
        return None
    if not all(isinstance(address, str) for address in addresses):
        return None
    try:
        return Answer(tuple(str(ipaddress.ip_address(address)) for address in addresses))
    except ValueError:
        return None
