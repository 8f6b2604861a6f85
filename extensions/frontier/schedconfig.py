"""The scheduler's settings, read once (the add-on installed their defaults)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from extensions import compat
from extensions.frontier.bloom import BloomParams, bloom_from_settings
from extensions.frontier.ranks.state import RankBudget
from extensions.installed import require_addon

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings


@dataclass(frozen=True)
class SchedulerConfig:
    """The core's settings (each part reads its own), built by ``from_settings``
    alone: the defaults are the add-on's (defaults.py)."""

    persist: bool
    flush_on_start: bool
    max_idle_time: float
    fetch_batch: int
    max_unconfirmed: int
    enqueue_batch: int
    lease_timeout: float
    release_interval: float
    idle_poll_min: float
    idle_poll_max: float
    heartbeat_interval: float
    node_timeout: float
    node_forget_after: float
    log_interval: float
    bloom: BloomParams | None
    max_delay: float
    queue_by: str
    host_page_budget: int | RankBudget  # HOST_PAGE_BUDGET, or HOST_BUDGET_BY_RANK when set
    crawl_delay_max: float
    send_tolerance: float
    host_affinity: float
    series_hours: float

    @classmethod
    def from_settings(cls, s: BaseSettings) -> SchedulerConfig:
        require_addon(s, "DistributedScheduler")
        return cls(
            persist=s.getbool("SCHEDULER_PERSIST"),
            flush_on_start=s.getbool("SCHEDULER_FLUSH_ON_START"),
            max_idle_time=compat.max_idle_time(s),
            fetch_batch=s.getint("FRONTIER_FETCH_BATCH"),
            max_unconfirmed=s.getint("FRONTIER_MAX_UNCONFIRMED")
            or 2 * s.getint("CONCURRENT_REQUESTS")
            + s.getint("FRONTIER_FETCH_BATCH")
            + s.getint("ITEM_STORE_BATCH_SIZE"),
            enqueue_batch=s.getint("FRONTIER_ENQUEUE_BATCH"),
            lease_timeout=s.getfloat("FRONTIER_LEASE_TIMEOUT"),
            release_interval=s.getfloat("FRONTIER_RELEASE_INTERVAL"),
            idle_poll_min=s.getfloat("FRONTIER_IDLE_POLL_MIN"),
            idle_poll_max=s.getfloat("FRONTIER_IDLE_POLL_MAX"),
            heartbeat_interval=s.getfloat("NODE_HEARTBEAT_INTERVAL"),
            node_timeout=s.getfloat("NODE_TIMEOUT"),
            node_forget_after=s.getfloat("NODE_FORGET_AFTER"),
            log_interval=s.getfloat("LOGSTATS_INTERVAL"),  # Scrapy's own setting
            bloom=bloom_from_settings(s),
            max_delay=s.getfloat("FRONTIER_MAX_DELAY"),
            queue_by=s.get("FRONTIER_QUEUE_BY"),
            host_page_budget=RankBudget.from_settings(s) or s.getint("HOST_PAGE_BUDGET"),
            crawl_delay_max=s.getfloat("CLUSTER_CRAWL_DELAY_MAX"),
            send_tolerance=s.getfloat("CLUSTER_SEND_TOLERANCE"),
            host_affinity=s.getfloat("FRONTIER_HOST_AFFINITY"),
            series_hours=s.getfloat("SERIES_HOURS"),
        )
