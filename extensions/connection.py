"""The one Redis connection factory: builds a client from settings and pings it."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit, urlunsplit

import redis
from redis._parsers.commands import CommandPolicies, RequestPolicy, ResponsePolicy
from redis.backoff import NoBackoff
from redis.cluster import RedisCluster
from redis.commands.policies import StaticPolicyResolver
from redis.exceptions import RedisClusterException
from redis.maint_notifications import MaintNotificationsConfig
from redis.retry import Retry
from scrapy.settings import SETTINGS_PRIORITIES

from extensions import defaults, installed
from extensions.exceptions import RedisUnavailable
from extensions.runtime import runtime_of, state_of

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


def set_by_project(settings: BaseSettings, name: str) -> bool:
    """Whether the project (or the command line) set ``name``, not the add-on's defaults."""
    priority = settings.getpriority(name)
    return priority is not None and priority > SETTINGS_PRIORITIES["addon"]


def redis_url(settings: BaseSettings) -> str:
    """``REDIS_URL``, else one built from scrapy-redis's REDIS_HOST / PORT / DB /
    PARAMS when the project set those, else the default."""
    url = settings.get("REDIS_URL")
    if url and set_by_project(settings, "REDIS_URL"):
        return str(url)
    params = settings.getdict("REDIS_PARAMS")
    host = settings.get("REDIS_HOST") or params.get("host")
    port = settings.get("REDIS_PORT") or params.get("port")
    if not (host or port):
        return str(url or defaults.REDIS_URL)
    db = settings.get("REDIS_DB") or params.get("db") or 0
    username, password = params.get("username"), params.get("password")
    auth = ""
    if password:
        auth = f"{quote(str(username or ''), safe='')}:{quote(str(password), safe='')}@"
    return f"redis://{auth}{host or '127.0.0.1'}:{port or 6379}/{db}"


def _timeout(settings: BaseSettings, name: str, param: str, default: float) -> float:
    # scrapy-redis's REDIS_PARAMS timeouts count unless the project set ours
    params = settings.getdict("REDIS_PARAMS")
    priority = settings.getpriority(name) or 0
    if param in params and priority <= SETTINGS_PRIORITIES["addon"]:
        return float(params[param])
    return settings.getfloat(name, default)


def from_settings(settings: BaseSettings, *, ping: bool = True) -> redis.Redis:
    """A client for ``REDIS_URL``; with ``ping``, fail now with a clear error."""
    url = redis_url(settings)
    return connect(
        url,
        socket_timeout=_timeout(
            settings, "REDIS_SOCKET_TIMEOUT", "socket_timeout", defaults.REDIS_SOCKET_TIMEOUT
        ),
        connect_timeout=_timeout(
            settings,
            "REDIS_CONNECT_TIMEOUT",
            "socket_connect_timeout",
            defaults.REDIS_CONNECT_TIMEOUT,
        ),
        ping=ping,
        cluster=settings.getbool("REDIS_CLUSTER", defaults.REDIS_CLUSTER),
    )


def connect(
    url: str,
    *,
    socket_timeout: float = defaults.REDIS_SOCKET_TIMEOUT,
    connect_timeout: float = defaults.REDIS_CONNECT_TIMEOUT,
    ping: bool = True,
    cluster: bool = False,
) -> redis.Redis:
    """A client for ``url``: a plain one, or with ``cluster`` one for the Redis
    Cluster that ``url`` is a node of (it finds the other nodes itself)."""
    options = {
        "socket_timeout": socket_timeout,
        "socket_connect_timeout": connect_timeout,
        # One immediate retry replaces a pooled connection that died with a
        # Redis restart; redis-py's default retries sleep, which would
        # stall the reactor thread. Longer outages are the callers' to ride out.
        # Never after a timeout: the command may have run, and a flush or a
        # lease sent twice queues a retry again or leases requests nobody fetches.
        "retry": Retry(NoBackoff(), 1, supported_errors=(redis.ConnectionError,)),
    }
    try:
        if cluster:
            return _connect_cluster(url, options)
        # no CLIENT MAINT_NOTIFICATIONS at each connection: a managed cloud's
        # failover notices, which a Redis 7 refuses (logged at each connect)
        client = redis.Redis.from_url(
            url,
            health_check_interval=30,
            maint_notifications_config=MaintNotificationsConfig(enabled=False),
            **options,
        )
    except ValueError as exc:  # unknown scheme, bad port, ...
        raise RedisUnavailable(f"invalid REDIS_URL {mask_url(url)}: {exc}") from None
    if ping:
        ping_or_fail(client, url)
    return client


def ping_or_fail(client: redis.Redis, url: str) -> None:
    """Raise RedisUnavailable, with what to do, unless Redis at ``url`` answers."""
    try:
        client.ping()
    except redis.AuthenticationError as exc:
        raise RedisUnavailable(f"Redis at {mask_url(url)} refused the credentials: {exc}") from None
    except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
        raise RedisUnavailable(f"cannot reach Redis at {mask_url(url)}: {exc}") from None
    except redis.ResponseError as exc:
        raise RedisUnavailable(f"Redis at {mask_url(url)} refused to answer: {exc}") from None
    if not isinstance(client, RedisCluster):
        _refuse_cluster_node(client, url)


_KEYED = CommandPolicies(RequestPolicy.DEFAULT_KEYED, ResponsePolicy.DEFAULT_KEYED)


class _ScriptsRouteByTheirKeys(StaticPolicyResolver):
    """redis-py 8's cluster pipeline asks the server where each EVAL goes
    (COMMAND GETKEYS, with the whole script body: a round trip per script),
    though the keys are in the command (numkeys), as its direct path knows."""

    def resolve(self, command_name: str) -> CommandPolicies | None:
        if command_name in ("eval", "evalsha"):
            return _KEYED
        return super().resolve(command_name)


_SCRIPT_POLICIES = _ScriptsRouteByTheirKeys()


class _Cluster(RedisCluster):
    def pipeline(self, transaction=None, shard_hint=None):
        pipe = super().pipeline(transaction, shard_hint)
        pipe._policy_resolver = _SCRIPT_POLICIES  # pipeline() passes none of its own
        return pipe


def _connect_cluster(url: str, options: dict) -> redis.Redis:
    # RedisCluster asks the node for the slot map as it is built, so reaching
    # the cluster is checked here whether or not the caller wants a ping.
    try:
        client = _Cluster.from_url(url, policy_resolver=_SCRIPT_POLICIES, **options)
        return client  # type: ignore[return-value]
    except redis.AuthenticationError as exc:
        raise RedisUnavailable(f"Redis at {mask_url(url)} refused the credentials: {exc}") from None
    except RedisClusterException as exc:
        if "not enabled" in str(exc).lower():
            raise RedisUnavailable(
                f"REDIS_CLUSTER is on but Redis at {mask_url(url)} is not a cluster node; "
                "turn REDIS_CLUSTER off to use it as a single Redis"
            ) from None
        message = f"cannot reach the Redis Cluster at {mask_url(url)}: {exc}"
        raise RedisUnavailable(message) from None
    except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
        raise RedisUnavailable(f"cannot reach Redis at {mask_url(url)}: {exc}") from None


def _refuse_cluster_node(client: redis.Redis, url: str) -> None:
    """A cluster node used as a single Redis would fail on the first script that
    touches two keys (CROSSSLOT); say what to do at once instead."""
    try:
        enabled = client.info("cluster").get("cluster_enabled")
    except redis.RedisError:
        return  # INFO may be renamed or forbidden; the ping already passed
    if enabled:
        raise RedisUnavailable(
            f"Redis at {mask_url(url)} is a Redis Cluster node: set REDIS_CLUSTER=True "
            "(keys then carry a {NAME} hash tag)"
        )


# Errors that are about the server, not about the value written: READONLY
# after a failover, OOM, a busy script, a cluster that is down or moving, a
# key of the wrong type. Anything else Redis refuses (a score that is not a
# number, a value too large, a script failing on its arguments) is the entry's.
_SERVER_SIDE = ("READONLY", "OOM", "BUSY", "LOADING", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN",
                "MOVED", "ASK", "NOSCRIPT", "NOPERM", "NOAUTH", "WRONGTYPE", "MISCONF",
                "EXECABORT", "CROSSSLOT")  # fmt: skip


def mongo_error() -> type[Exception]:
    """pymongo's base error, imported when an exception is being matched
    (``except mongo_error():``), not when a module that may meet one is: a node
    without MongoDB would pay pymongo's import at every start."""
    from pymongo.errors import PyMongoError

    return PyMongoError


def mongo_client(uri: str, server_selection_timeout: float = 5.0) -> Any:
    """A pymongo client for every MongoDB part of the stack: named in the server's
    logs, and failing after ``server_selection_timeout`` seconds unless the URI
    sets its own serverSelectionTimeoutMS."""
    import pymongo  # here: it adds a tenth of a second to every start

    options: dict[str, Any] = {"appname": "distributed-crawler"}
    if "serverselectiontimeoutms" not in uri.lower():
        options["serverSelectionTimeoutMS"] = int(server_selection_timeout * 1000)
    return pymongo.MongoClient(uri, **options)


def text(value: Any) -> str:
    """A Redis reply as text: the clients here return bytes."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def glob_escape(pattern: str) -> str:
    """``pattern`` with the characters SCAN's MATCH reads as wildcards escaped."""
    return "".join(f"\\{c}" if c in "*?[]\\" else c for c in pattern)


# redis-py strips the code from the errors it has a class for, so those are
# known by their class; the codes above catch any it passes on as they came.
_SERVER_SIDE_ERRORS = (
    redis.exceptions.OutOfMemoryError,
    redis.exceptions.ReadOnlyError,
    redis.exceptions.NoScriptError,
    redis.exceptions.NoPermissionError,
    redis.exceptions.ExecAbortError,
    redis.exceptions.ClusterError,  # CLUSTERDOWN, MASTERDOWN
    redis.exceptions.AskError,  # ASK, MOVED
    redis.exceptions.TryAgainError,
    redis.exceptions.ClusterCrossSlotError,
)


def is_bad_input(exc: Exception) -> bool:
    """True if Redis refused a write because of what was written: never for a
    lost connection, a cluster in failover, or a server that is full."""
    if not isinstance(exc, redis.ResponseError) or isinstance(exc, _SERVER_SIDE_ERRORS):
        return False
    text = str(exc)
    return not any(marker in text for marker in _SERVER_SIDE)


class RedisHealth:
    """Says once that Redis went away and once that it came back, per node.

    Every component of a crawler shares one (``health_for``), so an outage is
    one log line however many parts notice it.
    """

    def __init__(self, where: str, stats=None):
        self.where = where
        self.stats = stats
        self.down_since: float | None = None
        self.back_since: float | None = None

    def failed(self, exc: Exception, started: float | None = None) -> None:
        """``exc`` from a call made at ``started`` (monotonic; a call in a thread
        may fail long after it began): one from before Redis came back is no
        new outage."""
        if self.stats is not None:
            self.stats.inc_value("redis/errors")
        if started is not None and self.back_since is not None and started < self.back_since:
            return
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
            self.back_since = time.monotonic()

    @property
    def is_down(self) -> bool:
        return self.down_since is not None


def _installed(settings: BaseSettings) -> BaseSettings:
    # Scrapy builds the spider, which connects, before the add-on has run: the
    # environment's REDIS_URL counts then too
    if settings.getpriority(installed.MARKER) is None:
        return installed.with_defaults(settings)
    return settings


def health_for(crawler) -> RedisHealth:
    """The crawler's one RedisHealth, shared by its components."""

    def build() -> RedisHealth:  # (the settings read once, by whoever asks first)
        return RedisHealth(mask_url(redis_url(_installed(crawler.settings))), crawler.stats)

    return state_of(crawler, RedisHealth, build)


def client_for(crawler, *, ping: bool = False) -> redis.Redis:
    """The crawler's one Redis client, shared by its components; with ``ping``,
    fail now with a clear error if Redis cannot be reached."""
    runtime = runtime_of(crawler)
    settings = _installed(crawler.settings)
    if runtime.server is None:
        runtime.server = from_settings(settings, ping=False)
    if ping:
        ping_or_fail(runtime.server, redis_url(settings))
    return runtime.server
