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

import hashlib
import json
import logging
from typing import TYPE_CHECKING, Any

from scrapy.utils.python import to_unicode
from w3lib.url import canonicalize_url

from extensions import connection, keys, sharding
from extensions.exceptions import ConfigError

if TYPE_CHECKING:
    from scrapy import Request
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
    "SCHEDULER_QUEUE_KEY": "the queue is NAME:requests (docs/reference/keys.md)",
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


def settle_allowed_domains(spider: Any) -> None:
    """Read a one-shot ``allowed_domains`` (an iterator: scrapy-redis's example
    spiders set ``filter(None, domain.split(","))``) once into a list. Scrapy's
    offsite check reads the attribute more than once, and the second, empty read
    made every link of the crawl offsite."""
    domains = getattr(spider, "allowed_domains", None)
    if domains is None:
        return
    try:
        one_shot = iter(domains) is domains
    except TypeError:  # not iterable: Scrapy says so itself
        return
    if one_shot:
        spider.allowed_domains = list(domains)
        _warn_once(
            "%s.allowed_domains is an iterator (%s), which Scrapy's offsite check would "
            "read empty after its first read; read once into the list %r (make it a list)",
            type(spider).__name__, type(domains).__name__, spider.allowed_domains,
        )  # fmt: skip


def _path(value: Any) -> str:
    if isinstance(value, type):
        return f"{value.__module__}.{value.__qualname__}"
    return str(value or "")


def take_over(settings: BaseSettings) -> None:
    """Install the scheduler and dupefilter, taking over scrapy-redis leftovers."""
    for name, (ours, replaceable) in TAKEN_OVER.items():
        current = _path(settings.get(name))
        if not connection.set_by_project(settings, name) or current == ours:
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


def max_idle_time(settings: BaseSettings) -> float:
    """MAX_IDLE_TIME_BEFORE_CLOSE, or scrapy-redis's SCHEDULER_IDLE_BEFORE_CLOSE
    when only that is set."""
    if not connection.set_by_project(settings, "MAX_IDLE_TIME_BEFORE_CLOSE") and settings.get(
        "SCHEDULER_IDLE_BEFORE_CLOSE"
    ) not in (None, ""):
        return settings.getfloat("SCHEDULER_IDLE_BEFORE_CLOSE")
    return settings.getfloat("MAX_IDLE_TIME_BEFORE_CLOSE")


def unsupported(settings: BaseSettings) -> list[str]:
    """One line per combination of scrapy-redis settings this crawler cannot honour."""
    try:
        keys.start_type(settings)
    except ValueError as exc:
        return [f"{exc}: the start key is one or the other"]
    return []


def warn_ignored(settings: BaseSettings) -> list[str]:
    """One warning per scrapy-redis setting that has no meaning here; returns them."""
    said = []
    for name, why in IGNORED.items():
        if settings.get(name) not in (None, "", False) and connection.set_by_project(
            settings, name
        ):
            _warn_once("%s is a scrapy-redis setting this crawler ignores: %s", name, why)
            said.append(name)
    known = {"socket_timeout", "socket_connect_timeout", "password", "username", "db",
             "host", "port", "encoding", "retry_on_timeout"}  # fmt: skip
    for key in settings.getdict("REDIS_PARAMS"):
        if key not in known:
            _warn_once("REDIS_PARAMS[%r] is ignored: this crawler builds its own client", key)
            said.append(f"REDIS_PARAMS[{key}]")
    return said


PICKLE_PREFIX = b"\x80"  # every pickle of protocol 2 or later starts so
SCRAPY_REDIS_FINGERPRINTS = "scrapy-redis"  # NAME:fingerprinter after a migration


START_TYPE_SETTINGS = {
    "set": "REDIS_START_URLS_AS_SET = True",
    "zset": "REDIS_START_URLS_AS_ZSET = True",
    "list": "neither REDIS_START_URLS_AS_SET nor _AS_ZSET",
}


def start_key_problem(kind: str, spider_keys: keys.SpiderKeys) -> str | None:
    """Why a start key of Redis type ``kind`` cannot be read under the settings."""
    if kind in ("none", spider_keys.start_type):
        return None
    setting = START_TYPE_SETTINGS.get(kind)
    how = f"with {setting} it is read as one" if setting else "this crawler cannot read it"
    return (f"{spider_keys.start_urls} is a {kind}, where the settings say a "
            f"{spider_keys.start_type}: {how}")  # fmt: skip


def foreign_state(server: Any, spider_keys: keys.SpiderKeys) -> list[str]:
    """One line per key holding state this crawler cannot read as it is
    (scrapy-redis's set dupefilter or pickled queue, a start key of another
    type than the settings say); empty if none."""
    pipe = server.pipeline(transaction=False)
    for key in (spider_keys.dupefilter, spider_keys.requests, spider_keys.start_urls):
        pipe.type(key)
    pipe.exists(spider_keys.migrating("requests"), spider_keys.migrating("dupefilter"))
    pipe.get(spider_keys.fingerprinter)
    dupefilter, requests, start, migrating, fingerprinter = (
        connection.text(v) if isinstance(v, bytes) else v for v in pipe.execute()
    )
    first = server.zrange(spider_keys.requests, 0, 0) if requests == "zset" else []
    to_migrate = []
    if dupefilter not in ("none", "hash"):
        to_migrate.append(f"{spider_keys.dupefilter} is a {dupefilter}, where this crawler "
                          "keeps a hash (scrapy-redis's dupefilter is a set)")  # fmt: skip
    if requests not in ("none", "zset"):
        to_migrate.append(f"{spider_keys.requests} is a {requests}, where this crawler "
                          "keeps a sorted set (scrapy-redis's FIFO/LIFO queue?)")  # fmt: skip
    elif first and first[0].startswith(PICKLE_PREFIX):
        to_migrate.append(f"{spider_keys.requests} holds pickled requests (scrapy-redis's queue)")
    if migrating:
        to_migrate.append(f"a migration of {spider_keys.name} was interrupted "
                          f"({spider_keys.migrating('*')} is left)")  # fmt: skip
    found = []
    if fingerprinter not in (None, SCRAPY_REDIS_FINGERPRINTS):
        found.append(f"{spider_keys.fingerprinter} = {fingerprinter!r:.60} names no fingerprint "
                     f"scheme this crawler knows (only {SCRAPY_REDIS_FINGERPRINTS!r})")  # fmt: skip
    problem = start_key_problem(start, spider_keys)
    if problem:
        found.append(problem)
    problem = sharding.shards_problem(server, spider_keys)
    if problem:
        found.append(problem)
    if to_migrate:
        to_migrate.append(
            "this is a crawl of scrapy-redis in progress: run `scrapy migrate "
            f"{spider_keys.name}` to carry it over (or delete those keys, or crawl under "
            "another spider name)"
        )
    return found + to_migrate


class ScrapyRedisFingerprinter:
    """scrapy-redis's request fingerprint: SHA-1 of the method, the canonical URL
    and the body as JSON. A crawl carried over from scrapy-redis keeps using it,
    so the URLs its old dupefilter saw stay seen (Scrapy's own fingerprint of
    the same request differs)."""

    def fingerprint(self, request: Request) -> bytes:
        data = {
            "method": to_unicode(request.method),
            "url": canonicalize_url(request.url),
            "body": (request.body or b"").hex(),
        }
        return hashlib.sha1(json.dumps(data, sort_keys=True).encode()).digest()


def fingerprinter_for(server: Any, spider_keys: keys.SpiderKeys, default: Any) -> Any:
    """The fingerprinter of this crawl's dupefilter: ``default`` (Scrapy's), or
    scrapy-redis's when ``scrapy migrate`` carried the crawl over."""
    scheme = server.get(spider_keys.fingerprinter)
    if scheme is None:
        return default
    if connection.text(scheme) == SCRAPY_REDIS_FINGERPRINTS:
        logger.info(
            "%s was carried over from scrapy-redis: its dupefilter keeps scrapy-redis's "
            "request fingerprints",
            spider_keys.name,
        )
        return ScrapyRedisFingerprinter()
    raise ConfigError(
        f"{spider_keys.fingerprinter} = {connection.text(scheme)!r:.60} names no fingerprint "
        f"scheme this crawler knows (only {SCRAPY_REDIS_FINGERPRINTS!r})"
    )
