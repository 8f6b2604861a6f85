"""Which shards of a sharded frontier a lease asks, and for how many requests.

Asking every shard each time would cost a script call per shard per lease and
over-lease many times what the node wants; asking a fixed window split evenly
would hand a crawl whose work sits in a few shards one request per shard per
round trip. So a node remembers the shards that last had work ("hot": leased
from, waiting on politeness, or just written to by this node) and asks those
for the bulk, plus a few others in turn ("probes") so no shard is left out.
When a lease finds nothing, the next one probes a whole window, so an idle
node looks through every shard in a few round trips before it backs off.
"""

from __future__ import annotations

from collections.abc import Iterable

# cold shards a busy node looks into per lease: enough to find work another
# node put there within (shards / LEASE_PROBES) leases, cheap when they are empty
LEASE_PROBES = 2
# requests asked of each hot shard at least: a shard holds many hosts, and a
# script call per request would cost Redis more than the request itself
HOT_SHARE = 4


class LeasePlanner:
    def __init__(self, shards: int):
        self.shards = shards
        self._hot: dict[int, None] = {}  # insertion-ordered set
        self._hot_cursor = 0
        self._cold_cursor = 0
        self._had_work = True
        self._swept = 0  # cold shards found empty since the last lease with work
        self._probed: list[int] = []
        self._alternate = False

    def plan(self, count: int) -> list[tuple[int, int]]:
        """(shard, requests to ask of it) pairs, asking for ``count`` in all."""
        if self.shards == 1:
            self._probed = [0]
            return [(0, count)]
        hot = list(self._hot)
        if hot:
            start = self._hot_cursor % len(hot)
            hot = hot[start:] + hot[:start]
        cold = self.shards - len(hot)
        width = min(count, self.shards)
        probes = min(cold, width if not hot or not self._had_work else LEASE_PROBES)
        if hot and probes >= width:
            probes = width - 1  # room for at least one hot shard
        if probes == 0 and cold:  # one request wanted: hot and cold shards take turns
            self._alternate = not self._alternate
            probes = 1 if self._alternate else 0
        take = min(len(hot), width - probes, max((count - probes) // HOT_SHARE, 1))
        asked_hot = hot[:take]
        self._hot_cursor += take
        self._probed = self._next_cold(probes)
        plan = [(shard, 1) for shard in self._probed]
        if asked_hot:
            plan += zip(asked_hot, _split(count - probes, take), strict=True)
        else:
            plan = list(zip(self._probed, _split(count, probes), strict=True))
        return plan

    def _next_cold(self, wanted: int) -> list[int]:
        found: list[int] = []
        for _ in range(self.shards):
            if len(found) == wanted:
                break
            shard = self._cold_cursor % self.shards
            self._cold_cursor += 1
            if shard not in self._hot:
                found.append(shard)
        return found

    def record(self, outcome: Iterable[tuple[int, int, bool]]) -> None:
        """What each shard asked gave: (shard, requests leased, work waiting there)."""
        leased = 0
        for shard, got, waiting in outcome:
            leased += got
            if got or waiting:
                self._hot[shard] = None
            else:
                self._hot.pop(shard, None)
        self._had_work = leased > 0
        self._swept = 0 if leased else self._swept + len(self._probed)

    def mark_hot(self, shards: Iterable[int]) -> None:
        """Shards this node just wrote requests to: they have work."""
        for shard in shards:
            self._hot[shard] = None

    @property
    def looked_everywhere(self) -> bool:
        """Whether the last lease found nothing, and every shard not known to
        hold work has been looked into since work was last found."""
        return not self._had_work and self._swept >= self.shards - len(self._hot)


def _split(total: int, parts: int) -> list[int]:
    """``total`` in ``parts`` shares that differ by at most one."""
    base, extra = divmod(total, parts)
    return [base + (1 if n < extra else 0) for n in range(parts)]
