"""The one Redis connection factory: builds a client from settings and pings it."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

import redis

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
