"""The one Redis connection factory: builds a client from settings and pings it."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from extensions import defaults
from extensions.exceptions import RedisUnavailable

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

logger = logging.getLogger(__name__)


def mask_url(url: str) -> str:
    """The URL with its password replaced by ``***``, for logs and errors."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable URL>"
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    netloc = f"{user}:***@{host}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def redis_url(settings: BaseSettings) -> str:
    return settings.get("REDIS_URL") or defaults.REDIS_URL


def from_settings(settings: BaseSettings, *, ping: bool = True) -> redis.Redis:
    """A client for ``REDIS_URL``; with ``ping``, fail now with a clear error."""
    url = redis_url(settings)
    return connect(
        url,
        socket_timeout=settings.getfloat("REDIS_SOCKET_TIMEOUT", defaults.REDIS_SOCKET_TIMEOUT),
        connect_timeout=settings.getfloat("REDIS_CONNECT_TIMEOUT", defaults.REDIS_CONNECT_TIMEOUT),
        ping=ping,
    )


def connect(
    url: str,
    *,
    socket_timeout: float = defaults.REDIS_SOCKET_TIMEOUT,
    connect_timeout: float = defaults.REDIS_CONNECT_TIMEOUT,
    ping: bool = True,
) -> redis.Redis:
    try:
        client = redis.Redis.from_url(
            url,
            socket_timeout=socket_timeout,
            socket_connect_timeout=connect_timeout,
            health_check_interval=30,
            # One immediate retry replaces a pooled connection that died with a
            # Redis restart; redis-py's default retries sleep, which would
            # stall the reactor thread. Longer outages are the callers' to ride out.
            retry=Retry(NoBackoff(), 1),
        )
    except ValueError as exc:  # unknown scheme, bad port, ...
        raise RedisUnavailable(f"invalid REDIS_URL {mask_url(url)}: {exc}") from None
    if ping:
        try:
            client.ping()
        except redis.AuthenticationError as exc:
            raise RedisUnavailable(
                f"Redis at {mask_url(url)} refused the credentials: {exc}"
            ) from None
        except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
            raise RedisUnavailable(f"cannot reach Redis at {mask_url(url)}: {exc}") from None
    return client


def describe(client: redis.Redis) -> str:
    """host:port/db of a client, for logs (never the password)."""
    kwargs = client.connection_pool.connection_kwargs
    where = kwargs.get("path") or f"{kwargs.get('host', '?')}:{kwargs.get('port', '?')}"
    return f"{where}/{kwargs.get('db', 0)}"


class RedisHealth:
    """Says once that Redis went away and once that it came back, per node.

    Every component of a crawler shares one (``health_for``), so an outage is
    one log line however many parts notice it.
    """

    def __init__(self, where: str, stats=None):
        self.where = where
        self.stats = stats
        self.down_since: float | None = None

    def failed(self, exc: Exception) -> None:
        if self.stats is not None:
            self.stats.inc_value("redis/errors")
        if self.down_since is None:
            self.down_since = time.monotonic()
            logger.error("lost Redis at %s (%s); retrying until it is back", self.where, exc)
            if self.stats is not None:
                self.stats.inc_value("redis/outages")

    def ok(self) -> None:
        if self.down_since is not None:
            logger.warning(
                "Redis at %s is back after %.1fs", self.where, time.monotonic() - self.down_since
            )
            self.down_since = None

    @property
    def is_down(self) -> bool:
        return self.down_since is not None


def health_for(crawler) -> RedisHealth:
    health = getattr(crawler, "_redis_health", None)
    if health is None:
        health = RedisHealth(mask_url(redis_url(crawler.settings)), crawler.stats)
        crawler._redis_health = health
    return health
