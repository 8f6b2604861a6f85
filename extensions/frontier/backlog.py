"""How much leased work a node may hold unconfirmed (``FRONTIER_MAX_UNCONFIRMED``).

A request stays leased until its page is handled and what it produced is durable:
its child requests in Redis, its items in the item store. When the store is slow,
fetched pages wait for it while the downloader fetches more, and every one of them
is fetched again if the node dies. So the node leases no more once it holds the
bound (buffered, being fetched, parsed and waiting for the store, finished and not
yet released): the item store's pace becomes the node's, and a kill -9 re-fetches
at most about that many pages.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy.statscollectors import StatsCollector


class Backlog:
    def __init__(
        self,
        limit: int,
        stats: StatsCollector,
        freed: Callable[[], object],
        full: Callable[[], object] = lambda: None,
    ):
        self.limit = limit
        self.stats = stats
        self.freed = freed  # the node looks for work again at once
        self.full = full  # the item store is told to write what it holds
        self.held = 0
        self.held_back = False

    def room(self, held: int) -> int:
        """How many more requests may be leased while ``held`` are unconfirmed;
        counts each time the node starts waiting for its backlog (stats)."""
        self.held = held
        room = max(self.limit - held, 0)
        if not room and not self.held_back:
            self.held_back = True
            self.stats.inc_value("frontier/backlog_full")
            self.full()
        return room

    def settled(self, held: int) -> None:
        """After releases: the node leases again once below the bound."""
        self.held = held
        if self.held_back and held < self.limit:
            self.held_back = False
            self.freed()
        self.stats.max_value("frontier/backlog_max", held)
