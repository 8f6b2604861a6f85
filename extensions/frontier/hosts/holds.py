"""Holds another node set, heard within a poll rather than at the next lease.

A hold stops new leases of its host at once, but a node may have buffered
requests of that host, leased before: without word of the hold they would go
inside it (a whole lease's worth, on a node busy enough to be slow). Every hold
``scripts/host_feedback.lua`` sets is added to the stream ``NAME:holds`` (one per
frontier shard); each node reads what came since it last looked, ten times a
second, so its own requests of a held host wait in Redis with the host. The
stream keeps its last thousand or so entries; a node that falls further behind
than that leaves the rest to the leases, as before.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from extensions import clock, connection

if TYPE_CHECKING:
    import redis

    from extensions.keys import SpiderKeys

HOLDS_READ = 1000  # entries read from one shard's stream per poll, at most
GROUP_MAX = 2048  # characters: a longer group name is not one a node wrote


class HoldsHeard:
    """Reads the holds stream of each frontier shard from where it last stopped."""

    def __init__(self, server: redis.Redis, keys: SpiderKeys, now: float | None = None):
        self.server = server
        self.streams = [shard.holds for shard in keys.all_shards()]
        # from now on: a hold set before this node started reached it with its leases
        start = f"{int((clock.now() if now is None else now) * 1000)}-0"
        self._last = dict.fromkeys(self.streams, start)
        #: malformed entries ignored since the last look (anyone may write to Redis)
        self.bad = 0

    def poll(self) -> list[tuple[str, float]]:
        """(group, hold end in s since epoch) for each hold added since the last
        poll that has not ended yet. Raises redis.RedisError."""
        pipe = self.server.pipeline(transaction=False)
        for stream in self.streams:
            pipe.xread({stream: self._last[stream]}, count=HOLDS_READ)
        now = clock.now()
        heard: list[tuple[str, float]] = []
        for stream, answer in zip(self.streams, pipe.execute(), strict=True):
            for _name, entries in answer or []:
                for entry_id, entry in entries:
                    self._last[stream] = connection.text(entry_id)
                    hold = self._read(entry)
                    if hold is not None and hold[1] > now:
                        heard.append(hold)
        return heard

    def _read(self, entry: dict[Any, Any]) -> tuple[str, float] | None:
        group, until = entry.get(b"g"), entry.get(b"u")
        try:
            if not isinstance(group, bytes) or not 0 < len(group) <= GROUP_MAX:
                raise ValueError(group)
            end = float(until) / 1000  # type: ignore[arg-type]
            if not math.isfinite(end):
                raise ValueError(until)
            return connection.text(group), end
        except (TypeError, ValueError):
            self.bad += 1
            return None
