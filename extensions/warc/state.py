"""What a node's WARC capture shares between its middleware, which writes, and
its frontier part, which makes the records durable before leases go."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from extensions.runtime import state_of

if TYPE_CHECKING:
    from extensions.warc.captures import CaptureIndex
    from extensions.warc.digests import PayloadIndex
    from extensions.warc.files import WarcFiles


@dataclass
class WarcState:
    #: the node's WARC files, opened by the middleware at its first record
    files: WarcFiles | None = None
    #: WARC_REVISITS: payloads archived in full, entered in the crawl's digest
    #: index once the part has synced their records (digests.py)
    payloads: PayloadIndex | None = None
    #: WARC_CAPTURES_IN_REDIS: each URL's newest capture, entered likewise (captures.py)
    captures: CaptureIndex | None = None


def warc_state(crawler: Any) -> WarcState:
    return state_of(crawler, WarcState, WarcState)
