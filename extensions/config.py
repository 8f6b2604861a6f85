"""One check of every setting the stack reads, run once when a node starts.

A bad value is one line naming the setting, the value and what is allowed;
``scrapy crawl`` prints each and exits with status 1, before anything
connects anywhere. Components still fall back to ``extensions.defaults`` when
used on their own, but a crawl never starts with a value they would choke on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from extensions import capability, compat, defaults, engine, gctuning, shardcount
from extensions.dns.resolver import dns_servers_problem
from extensions.downloadermiddlewares.botauth import SETTING_CHECKS as BOT_AUTH_CHECKS
from extensions.exceptions import ConfigError
from extensions.frontier.groups import QUEUE_BY
from extensions.frontier.part import parts_problem
from extensions.settingchecks import Check, component, number_map
from extensions.settingchecks import choice as _choice
from extensions.settingchecks import flag as _flag
from extensions.settingchecks import number as _number
from extensions.spidermiddlewares.duplicates import SETTING_CHECKS as CONTENT_CHECKS
from extensions.spidermiddlewares.robotsmeta import SETTING_CHECKS as ROBOTS_META_CHECKS
from extensions.spidermiddlewares.scoring import SETTING_CHECKS as SCORING_CHECKS
from extensions.spidermiddlewares.usagesignals import SETTING_CHECKS as USAGE_CHECKS
from extensions.urlnorm.chain import SETTING_CHECKS as URLNORM_CHECKS
from extensions.urlpolicy import resolver_problem

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings


def _shards(settings: BaseSettings, name: str) -> str | None:
    if str(settings.get(name, defaults.FRONTIER_SHARDS)).strip().lower() == shardcount.AUTO:
        return None
    problem = _number(int, 1, shardcount.MAX_SHARDS)(settings, name)
    return f'{problem}, or "auto"' if problem else None


def _int_list(low: int, high: int, what: str) -> Check:
    """A check that the setting lists whole numbers between ``low`` and ``high``."""

    def check(settings: BaseSettings, name: str) -> str | None:
        try:
            values = [int(v) for v in settings.getlist(name, getattr(defaults, name, []))]
        except (TypeError, ValueError):
            return f"must be a list of {what}"
        if any(not low <= v <= high for v in values):
            return f"{what} are between {low} and {high}"
        return None

    return check


def _schemes(settings: BaseSettings, name: str) -> str | None:
    schemes = settings.getlist(name, defaults.ALLOWED_SCHEMES)
    if not schemes or not all(isinstance(s, str) and s.isalnum() for s in schemes):
        return "must name at least one scheme, e.g. http,https"
    return None


HOST_RATES_FORM = 'hosts to requests per second, e.g. {"example.com": 2}'


def _host_rates(settings: BaseSettings, name: str) -> str | None:
    _, problem = number_map(settings, name, HOST_RATES_FORM, "rates (0: no limit)")
    return problem


def _metrics_port(settings: BaseSettings, name: str) -> str | None:
    text = str(settings.get(name) or "").strip()
    if text in ("", "0"):
        return None
    low, _, high = text.partition("-")
    try:
        first, last = int(low), int(high or low)
    except ValueError:
        return "must be a port, a range such as 9410-9419, or empty (off)"
    if not 1 <= first <= last <= 65535:
        return "ports must be between 1 and 65535, the range low to high"
    return None


def _redis_url(settings: BaseSettings, name: str) -> str | None:
    url = str(settings.get(name) or defaults.REDIS_URL)
    if not url.startswith(("redis://", "rediss://", "unix://")):
        return "must start with redis://, rediss:// or unix://"
    return None


def _meta_keys(settings: BaseSettings, name: str) -> str | None:
    keys = settings.getlist(name, defaults.START_URL_META_KEYS)
    if not all(isinstance(k, str) and k for k in keys):
        return 'must be a list of meta key names, or ["*"]'
    return None


def _gc_threshold(settings: BaseSettings, name: str) -> str | None:
    try:
        gctuning.parse_threshold(settings.get(name, defaults.GC_THRESHOLD))
    except ValueError as problem:
        return str(problem)
    return None


def _markers(settings: BaseSettings, name: str) -> str | None:
    markers = settings.getlist(name, [])
    if not all(isinstance(m, str) and m.strip() for m in markers):
        return 'must be a list of texts, e.g. ["verify you are human"]'
    return None


def _secure_cookie(settings: BaseSettings, name: str) -> str | None:
    value = str(settings.get(name, defaults.CONSOLE_SECURE_COOKIE)).lower()
    return None if value in ("auto", "true", "false", "1", "0") else "must be True, False or auto"


CHECKS: dict[str, Check] = {
    "REDIS_URL": _redis_url,
    "REDIS_SOCKET_TIMEOUT": _number(float, 0, above=True),
    "REDIS_CONNECT_TIMEOUT": _number(float, 0, above=True),
    "REDIS_CLUSTER": _flag,
    "REDIS_START_URLS_BATCH_SIZE": _number(int, 1, 100_000),
    "REDIS_START_URLS_POLL": _number(float, 0.05),
    # negative: close as soon as the cluster is idle (scrapy-redis's meaning)
    "MAX_IDLE_TIME_BEFORE_CLOSE": _number(float),
    "START_URL_META_KEYS": _meta_keys,
    "REDIS_START_URLS_DONT_FILTER": _flag,
    "ALLOWED_SCHEMES": _schemes,
    "ALLOWED_PORTS": _int_list(1, 65535, "port numbers"),
    "DENY_PRIVATE_NETWORKS": _flag,
    "DNS_SHARED": _flag,
    "DNS_SERVERS": dns_servers_problem,
    "DNS_CACHE_MIN_TTL": _number(int, 0),
    "DNS_CACHE_MAX_TTL": _number(int, 1),
    "DNS_NEGATIVE_TTL": _number(int, 0),
    "DOWNLOAD_MAXSIZE": _number(int, 0),
    "MAX_LINKS_PER_PAGE": _number(int, 0),
    "SCHEDULER_PERSIST": _flag,
    "SCHEDULER_FLUSH_ON_START": _flag,
    "DUPEFILTER_MODE": _choice("exact", "bloom"),
    "DUPEFILTER_BLOOM_CAPACITY": _number(int, 1),
    "DUPEFILTER_BLOOM_ERROR_RATE": _number(float, 0, 0.5, above=True),
    "DUPEFILTER_LOCAL_CACHE": _number(int, 0),
    "FRONTIER_FETCH_BATCH": _number(int, 1, 10_000),
    "FRONTIER_MAX_UNCONFIRMED": _number(int, 0),
    "FRONTIER_ENQUEUE_BATCH": _number(int, 1, 100_000),
    "FRONTIER_LEASE_TIMEOUT": _number(float, 0, above=True),
    "FRONTIER_RELEASE_INTERVAL": _number(float, 0, above=True),
    "FRONTIER_IDLE_POLL_MIN": _number(float, 0, above=True),
    "FRONTIER_IDLE_POLL_MAX": _number(float, 0, above=True),
    "FRONTIER_PARTS_BASE": parts_problem,
    "FRONTIER_PARTS": parts_problem,
    "FRONTIER_MAX_DELAY": _number(float, 0, above=True),
    "RETRY_BACKOFF_BASE": _number(float, 0),
    "RETRY_BACKOFF_MAX": _number(float, 0),
    "RETRY_AFTER_MAX": _number(float, 0),
    "URL_NORMALIZE_ENABLED": _flag,
    "CANONICAL_ENABLED": _flag,
    **CONTENT_CHECKS,
    **ROBOTS_META_CHECKS,
    **SCORING_CHECKS,
    # the settings the capability packages declare, each with its check
    **{name: s.check for name, s in capability.settings().items() if s.check},
    **USAGE_CHECKS,
    **BOT_AUTH_CHECKS,
    **URLNORM_CHECKS,
    "CLUSTER_HOST_RATE": _number(float, 0),
    "CLUSTER_CRAWL_DELAY_MAX": _number(float, 0),
    "CLUSTER_SEND_TOLERANCE": _number(float, 0, 1),
    "FRONTIER_HOST_AFFINITY": _number(float, 0, 60),
    "HOST_BACKOFF_STATUSES": _int_list(100, 599, "HTTP status codes"),
    "HOST_BACKOFF_BASE": _number(float, 0),
    "HOST_BACKOFF_MAX": _number(float, 0, above=True),
    "HOST_BACKOFF_FORGIVE": _number(float, 0),
    "HOST_BACKOFF_ERRORS": _number(int, 0),
    "HOST_BACKOFF_RETRY_TIMES": _number(int, 0),
    "HOST_BACKOFF_SHARE": _number(float, 0, 1, above=True),
    "HOST_BACKOFF_MIN_REFUSALS": _number(int, 1),
    "HOST_BACKOFF_WINDOW": _number(float, 1),
    "CLUSTER_AUTOTHROTTLE_ENABLED": _flag,
    "CLUSTER_AUTOTHROTTLE_MIN_RATE": _number(float, 0, above=True),
    "CLUSTER_AUTOTHROTTLE_STEP": _number(float, 0, above=True),
    "BAN_STATUSES": _int_list(100, 599, "HTTP status codes"),
    "BAN_MARKERS": _markers,
    "BAN_RETRY_TIMES": _number(int, 0),
    "BAN_HANDLER": component("handle_ban"),
    "ROBOTSTXT_RETRY_DELAY": _number(float, 0, above=True),
    "ROBOTSTXT_RETRY_TIMES": _number(int, 0),
    "ROBOTSTXT_SHARED": _flag,
    "ROBOTSTXT_CACHE_TTL": _number(int, 1, 86400),
    "SITEMAP_FROM_ROBOTS": _flag,
    "FRONTIER_QUEUE_BY": _choice(*QUEUE_BY),
    "FRONTIER_SHARDS": _shards,
    "HOST_PAGE_BUDGET": _number(int, 0),
    "TRAP_CHAIN_LIMIT": _number(int, 0),
    "TRAP_REPEATED_SEGMENTS": _number(int, 0),
    "TRAP_QUERY_VARIANTS": _number(int, 0),
    "CLUSTER_HOST_RATES": _host_rates,
    "PROXY_BAN_STATUSES": _int_list(100, 599, "HTTP status codes"),
    "USER_AGENT_ROTATION": _flag,
    "USER_AGENT_POOL_SIZE": _number(int, 1),
    "USER_AGENT_STICKY_PER_PROXY": _flag,
    "NODE_HEARTBEAT_INTERVAL": _number(float, 0, above=True),
    "NODE_TIMEOUT": _number(float, 0, above=True),
    "NODE_FORGET_AFTER": _number(float, 0, above=True),
    "NODE_STALL_TIME": _number(float, 0, above=True),
    "METRICS_PORT": _metrics_port,
    "GC_FREEZE": _flag,
    "GC_THRESHOLD": _gc_threshold,
    "MONGO_WRITE_MODE": _choice("upsert", "insert"),
    "MONGO_RETRY_TIME": _number(float, 0),
    "ITEM_STORE_BATCH_SIZE": _number(int, 1),
    "ITEM_STORE_FLUSH_INTERVAL": _number(float, 0, above=True),
    "ITEM_STORE_MAX_PENDING": _number(int, 1),
    "SERIES_HOURS": _number(float, 0, 168, above=True),
    "CONSOLE_PORT": _number(int, 0, 65535),
    "CONSOLE_SESSION_HOURS": _number(float, 0, above=True),
    "CONSOLE_SECURE_COOKIE": _secure_cookie,
    "CONSOLE_REFRESH": _number(float, 0, above=True),
    "CONSOLE_DLQ_SCAN": _number(int, 1),
}


def _relations(settings: BaseSettings) -> list[str]:
    """Settings that are fine alone but not together."""
    problems = []

    def value(name: str) -> float:
        return float(settings.get(name, getattr(defaults, name)))

    if value("FRONTIER_IDLE_POLL_MAX") < value("FRONTIER_IDLE_POLL_MIN"):
        problems.append("FRONTIER_IDLE_POLL_MAX must be at least FRONTIER_IDLE_POLL_MIN")
    if value("NODE_TIMEOUT") <= value("NODE_HEARTBEAT_INTERVAL"):
        problems.append(
            "NODE_TIMEOUT must be longer than NODE_HEARTBEAT_INTERVAL, or live nodes "
            "look dead between two heartbeats"
        )
    if value("ITEM_STORE_MAX_PENDING") < value("ITEM_STORE_BATCH_SIZE"):
        problems.append("ITEM_STORE_MAX_PENDING must be at least ITEM_STORE_BATCH_SIZE")
    if value("DNS_CACHE_MAX_TTL") < value("DNS_CACHE_MIN_TTL"):
        problems.append("DNS_CACHE_MAX_TTL must be at least DNS_CACHE_MIN_TTL")
    resolver = resolver_problem(settings)
    return [*problems, resolver] if resolver else problems


def problems(settings: BaseSettings) -> list[str]:
    """Every problem with the stack's settings, one line each (empty: all good)."""
    found = []
    for name, check in CHECKS.items():
        problem = check(settings, name)
        if problem:
            shown = settings.get(name, getattr(defaults, name, None))
            found.append(f"{name} = {shown!r:.100}: {problem}")
    if not found:  # relations read the values as numbers: only once each is one
        found = _relations(settings)
    found += compat.unsupported(settings)
    seam = engine.seam_problem()
    return [*found, seam] if seam else found


def check(settings: BaseSettings) -> None:
    """Raise ConfigError listing every problem, one per line."""
    found = problems(settings)
    if found:
        raise ConfigError("\n".join(found))
