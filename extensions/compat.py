"""Coming from scrapy-redis: its settings, honoured where they mean something
here, and said out loud where they do not.

* ``SCHEDULER`` / ``DUPEFILTER_CLASS`` left over from scrapy-redis are taken
  over by the add-on with a warning naming them (project settings outrank an
  add-on, so without this the stock scheduler would quietly keep running); any
  other scheduler or dupefilter is refused with one line.
* ``REDIS_HOST`` / ``REDIS_PORT`` / ``REDIS_DB`` / ``REDIS_PARAMS`` build the
  Redis URL when ``REDIS_URL`` is not set by the project (scrapy-redis gives
  ``REDIS_URL`` precedence too); ``REDIS_ENCODING`` decodes start-URL entries.
* ``SCHEDULER_IDLE_BEFORE_CLOSE`` stands for ``MAX_IDLE_TIME_BEFORE_CLOSE``
  when that is not set; a negative value closes a node as soon as the cluster
  is idle, as in scrapy-redis.
* Settings with no meaning here (``SCHEDULER_QUEUE_CLASS``,
  ``SCHEDULER_SERIALIZER``, ...) get one start-up warning each, saying why.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from scrapy.settings import SETTINGS_PRIORITIES

from extensions.exceptions import ConfigError

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

logger = logging.getLogger(__name__)

SCHEDULER = "extensions.frontier.scheduler.DistributedScheduler"
DUPEFILTER = "extensions.frontier.dupefilter.RedisDupeFilter"
# What a project may leave in SCHEDULER / DUPEFILTER_CLASS for the add-on to take over.
TAKEN_OVER = {
    "SCHEDULER": (SCHEDULER, {"scrapy_redis.scheduler.Scheduler",
                              "scrapy.core.scheduler.Scheduler"}),
    "DUPEFILTER_CLASS": (DUPEFILTER, {"scrapy_redis.dupefilter.RFPDupeFilter",
                                      "scrapy.dupefilters.RFPDupeFilter"}),
}  # fmt: skip

IGNORED = {
    "SCHEDULER_QUEUE_CLASS": "the queue is the frontier's own priority queue with leases "
    "(FIFO within a priority; DEPTH_PRIORITY orders by depth)",
    "SCHEDULER_QUEUE_KEY": "the queue is NAME:requests (see the README's key table)",
    "SCHEDULER_DUPEFILTER_KEY": "the dupefilter is NAME:dupefilter",
    "SCHEDULER_DUPEFILTER_CLASS": "the add-on's RedisDupeFilter is used",
    "SCHEDULER_SERIALIZER": "requests are stored as JSON, never pickle",
    "REDIS_DECODE_RESPONSES": "the stack reads bytes from Redis itself",
}


_said: set[str] = set()


def _warn_once(message: str, *args: Any) -> None:
    # `scrapy crawl` checks the settings before the crawler applies them again
    text = message % args
    if text not in _said:
        _said.add(text)
        logger.warning("%s", text)


def _set_by_project(settings: BaseSettings, name: str) -> bool:
    priority = settings.getpriority(name)
    return priority is not None and priority > SETTINGS_PRIORITIES["addon"]


def _path(value: Any) -> str:
    if isinstance(value, type):
        return f"{value.__module__}.{value.__qualname__}"
    return str(value or "")


def take_over(settings: BaseSettings) -> None:
    """Install the scheduler and dupefilter, taking over scrapy-redis leftovers."""
    for name, (ours, replaceable) in TAKEN_OVER.items():
        current = _path(settings.get(name))
        if not _set_by_project(settings, name) or current == ours:
            settings.set(name, ours, "addon")
            continue
        if current in replaceable:
            _warn_once(
                "%s = %s is left over from before the add-on; the add-on's %s takes over "
                "(delete the line from your settings)",
                name,
                current,
                ours.rsplit(".", 1)[1],
            )
            settings.set(name, ours, settings.getpriority(name) or "addon")
            continue
        raise ConfigError(
            f"{name} = {current!r}: the distributed add-on needs its own {name} ({ours}); "
            "remove this setting or the add-on"
        )


def redis_url(settings: BaseSettings, default: str) -> str:
    """``REDIS_URL``, else one built from scrapy-redis's REDIS_HOST / PORT / DB /
    PARAMS when the project set those, else ``default``."""
    url = settings.get("REDIS_URL")
    if url and _set_by_project(settings, "REDIS_URL"):
        return str(url)
    params = settings.getdict("REDIS_PARAMS")
    host = settings.get("REDIS_HOST") or params.get("host")
    port = settings.get("REDIS_PORT") or params.get("port")
    if not (host or port):
        return str(url or default)
    db = settings.get("REDIS_DB") or params.get("db") or 0
    username, password = params.get("username"), params.get("password")
    auth = ""
    if password:
        auth = f"{quote(str(username or ''), safe='')}:{quote(str(password), safe='')}@"
    return f"redis://{auth}{host or '127.0.0.1'}:{port or 6379}/{db}"


def max_idle_time(settings: BaseSettings, default: float) -> float:
    """MAX_IDLE_TIME_BEFORE_CLOSE, or scrapy-redis's SCHEDULER_IDLE_BEFORE_CLOSE
    when only that is set."""
    if not _set_by_project(settings, "MAX_IDLE_TIME_BEFORE_CLOSE") and settings.get(
        "SCHEDULER_IDLE_BEFORE_CLOSE"
    ) not in (None, ""):
        return settings.getfloat("SCHEDULER_IDLE_BEFORE_CLOSE")
    return settings.getfloat("MAX_IDLE_TIME_BEFORE_CLOSE", default)


# Settings whose meaning would change what is crawled: refused rather than ignored.
UNSUPPORTED = {
    "REDIS_START_URLS_AS_SET": "start URLs are read from a list (LPUSH); move the set's "
    "members into NAME:start_urls and turn this off",
    "REDIS_START_URLS_AS_ZSET": "start URLs are read from a list (LPUSH); move the sorted "
    "set's members into NAME:start_urls and turn this off",
}


def unsupported(settings: BaseSettings) -> list[str]:
    """One line per scrapy-redis setting this crawler cannot honour."""
    return [
        f"{name} = {settings.get(name)!r}: {why}"
        for name, why in UNSUPPORTED.items()
        if settings.getbool(name, False)
    ]


def warn_ignored(settings: BaseSettings) -> list[str]:
    """One warning per scrapy-redis setting that has no meaning here; returns them."""
    said = []
    for name, why in IGNORED.items():
        if settings.get(name) not in (None, "", False) and _set_by_project(settings, name):
            _warn_once("%s is a scrapy-redis setting this crawler ignores: %s", name, why)
            said.append(name)
    known = {"socket_timeout", "socket_connect_timeout", "password", "username", "db",
             "host", "port", "encoding", "retry_on_timeout"}  # fmt: skip
    for key in settings.getdict("REDIS_PARAMS"):
        if key not in known:
            _warn_once("REDIS_PARAMS[%r] is ignored: this crawler builds its own client", key)
            said.append(f"REDIS_PARAMS[{key}]")
    return said


# The type each key must have here; scrapy-redis keeps a set dupefilter, and
# may keep start URLs in a set or sorted set.
EXPECTED_TYPES = {"dupefilter": b"hash", "requests": b"zset", "start_urls": b"list"}
PICKLE_PREFIX = b"\x80"  # every pickle of protocol 2 or later starts so


def foreign_state(server: Any, keys: Any) -> list[str]:
    """One line per key holding state this crawler cannot read (scrapy-redis's
    set dupefilter, its pickled queue, a set of start URLs); empty if none."""
    found = []
    pipe = server.pipeline(transaction=False)
    names = {name: getattr(keys, name) for name in EXPECTED_TYPES}
    for key in names.values():
        pipe.type(key)
    pipe.zrange(keys.requests, 0, 0)
    *types, first = pipe.execute()
    for (name, key), kind in zip(names.items(), types, strict=True):
        if kind not in (b"none", EXPECTED_TYPES[name]):
            found.append(f"{key} is a {kind.decode()}, where this crawler keeps a "
                         f"{EXPECTED_TYPES[name].decode()}")  # fmt: skip
    if first and first[0].startswith(PICKLE_PREFIX) and not found:
        found.append(f"{keys.requests} holds pickled requests (scrapy-redis's queue)")
    if found:
        found.append(
            "this is state from another crawler (scrapy-redis?); carrying it over is not "
            "supported yet: delete those keys (redis-cli DEL ...) or crawl under another "
            "spider name, then seed again"
        )
    return found
