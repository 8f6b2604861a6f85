"""The one way the tools and the tests build a Redis client of their own.

A node builds its clients with ``extensions.connection.connect`` (its timeouts,
one retry, a ping that names what is wrong). A tool or a test wants redis-py's
plain client instead, as a person at ``redis-cli`` would use it, less the
``CLIENT MAINT_NOTIFICATIONS`` handshake a Redis 7 refuses at every connect.
"""

from __future__ import annotations

from typing import Any

import redis
from redis.cluster import RedisCluster
from redis.maint_notifications import MaintNotificationsConfig


def redis_at(url: str, **options: Any) -> redis.Redis:
    """A client of the Redis at ``url`` (redis-py's options: ``socket_timeout``...)."""
    return redis.Redis.from_url(
        url, maint_notifications_config=MaintNotificationsConfig(enabled=False), **options
    )


def cluster_at(url: str, **options: Any) -> RedisCluster:
    """A client of the Redis Cluster that ``url`` is a node of."""
    return RedisCluster.from_url(url, **options)
