"""How many shards a crawl's frontier is split into (FRONTIER_SHARDS): a count,
or "auto", resolved against the Redis the crawl runs on (``keys.SpiderKeys.for_crawler``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from redis.cluster import RedisCluster

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

AUTO = "auto"  # FRONTIER_SHARDS chosen from the Redis the crawl runs on
MAX_SHARDS = 4096


def shards_setting(settings: BaseSettings) -> int | None:
    """FRONTIER_SHARDS as a count, or None for "auto"."""
    value = settings.get("FRONTIER_SHARDS")
    if str(value).strip().lower() == AUTO:
        return None
    return int(value)


# Shards per primary for FRONTIER_SHARDS = "auto": a shard's slot follows its
# name, so it takes about 30 per primary before each holds within ~15 % of an
# even share (docs/SCALING.md, `make bench` section 14).
AUTO_SHARDS_PER_PRIMARY = 32


def auto_shards(server: Any, shards_key: str, unsharded: tuple[str, ...]) -> int:
    """FRONTIER_SHARDS = "auto": the count the crawl recorded (in ``shards_key``);
    else 1 for a crawl begun unsharded (one of the ``unsharded`` keys exists) or on
    a single Redis; else 32 per primary of the cluster."""
    stored = server.get(shards_key)
    if stored is not None:
        try:
            return min(max(int(stored), 1), MAX_SHARDS)
        except ValueError:
            return 1  # not a count: shards_problem says so
    if not isinstance(server, RedisCluster):
        return 1
    if server.exists(*unsharded):
        return 1
    return min(len(server.get_primaries()) * AUTO_SHARDS_PER_PRIMARY, MAX_SHARDS)
