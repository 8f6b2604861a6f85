"""The project's own errors."""

from __future__ import annotations


class SerializationError(ValueError):
    """A request holds something that cannot be stored as JSON in Redis."""


class RedisUnavailable(RuntimeError):
    """Redis could not be reached; the message names the (masked) URL."""


class InvalidStartURL(ValueError):
    """A start URL entry is not something the crawler can fetch."""


class ConfigError(ValueError):
    """Settings a crawl cannot start with; one line per problem."""


class HostBanned(RuntimeError):
    """A request that came not from the frontier (robots.txt, engine.download) was
    answered with a ban: its caller sees a failure, never a page (robots.txt's
    middleware then holds the host's requests until robots.txt can be read)."""
