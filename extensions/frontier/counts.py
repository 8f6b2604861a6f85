"""What a node's scheduler counts, told to Scrapy's stats once a flush rather than
once a request (a stats call costs microseconds), and said in the log once."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from extensions.frontier.frontier import Frontier
    from extensions.frontier.results import Added

logger = logging.getLogger(__name__)


class FlushCounts:
    def __init__(self, stats: Any, host_page_budget: Any):
        self.stats = stats
        self.host_page_budget = host_page_budget
        self.enqueued = 0  # requests queued since the last flush
        self.dequeued = 0  # requests handed to the engine since the last flush
        self._over_budget_said: set[str] = set()
        self._bad_state_said = False

    def tell(self, frontier: Frontier) -> None:
        if self.enqueued:
            self.stats.inc_value("frontier/enqueued", self.enqueued)
            self.enqueued = 0
        if self.dequeued:
            self.stats.inc_value("frontier/dequeued", self.dequeued)
            self.dequeued = 0
        tally = frontier.tally
        if tally.left_to_owners:
            self.stats.inc_value("frontier/affinity/left_to_owner", tally.left_to_owners)
            tally.left_to_owners = 0
        if tally.taken_over:
            self.stats.inc_value("frontier/affinity/taken_over", tally.taken_over)
            tally.taken_over = 0
        if tally.bad_host_fields:
            self.stats.inc_value("hosts/bad_state", tally.bad_host_fields)
            # said once at WARNING; later ones are counted
            logger.log(
                logging.DEBUG if self._bad_state_said else logging.WARNING,
                "ignored %d malformed host state fields in Redis (another writer's)",
                tally.bad_host_fields,
            )
            self._bad_state_said = True
            tally.bad_host_fields = 0

    def added(self, written: int, result: Added) -> int:
        """Count what an enqueue of ``written`` requests did; the requests added."""
        added = result.new - len(result.over_budget) - result.over_crawl_budget
        self.stats.inc_value("frontier/added", added)
        if result.over_crawl_budget:
            self.stats.inc_value("frontier/dropped/crawl_budget", result.over_crawl_budget)
        self.stats.inc_value("dupefilter/filtered", written - result.new)
        groups = result.over_budget
        if groups:
            self.stats.inc_value("frontier/dropped/budget", len(groups))
            for group in set(groups) - self._over_budget_said:
                self._over_budget_said.add(group)
                logger.warning(
                    "%s has used its %s: further links to it are dropped (said once per host)",
                    group,
                    f"HOST_PAGE_BUDGET of {self.host_page_budget} requests"
                    if isinstance(self.host_page_budget, int)
                    else "page budget by its rank (HOST_BUDGET_BY_RANK)",
                )
        return added
