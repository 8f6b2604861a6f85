"""A node whose WARC writes fail (a full disk, a directory gone) archives
nothing it cannot keep: what it fetched goes back to the frontier unparsed, for
any node to fetch again, and it leases nothing for a while (5 s, doubled at each
failure in a row, at most 5 minutes). Then the next page it fetches tries the
disk again; the first write that goes through lifts the hold. Like the item
store's backlog, the hold shows in ``scrapy status``.
"""

from __future__ import annotations

from typing import Any

from extensions import clock
from extensions.runtime import state_of

FIRST_HOLD = 5.0  # seconds
LONGEST_HOLD = 300.0


class WriteHold:
    def __init__(self) -> None:
        self.failures = 0  # writes failed in a row
        self.until = 0.0
        self.reason = ""

    @property
    def held(self) -> bool:
        """Whether the last write failed (until one goes through)."""
        return self.failures > 0

    def waiting(self, now: float | None = None) -> bool:
        """Whether the node leases nothing now, nor tries the disk."""
        return self.held and (now or clock.now()) < self.until

    def failed(self, reason: str) -> float:
        self.failures += 1
        self.until = clock.now() + min(FIRST_HOLD * 2 ** (self.failures - 1), LONGEST_HOLD)
        self.reason = reason
        return self.until

    def wrote(self) -> bool:
        """A write went through; whether that lifts a hold."""
        lifted = self.held
        self.failures, self.until, self.reason = 0, 0.0, ""
        return lifted


def hold_for(crawler: Any) -> WriteHold:
    return state_of(crawler, WriteHold, WriteHold)
