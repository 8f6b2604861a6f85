"""Start URL entries as users push them to ``NAME:start_urls``, and their leases.

An entry is a raw URL or scrapy-redis's JSON form::

    {"url": "https://example.com/", "meta": {...}, "priority": 10, "method": "POST", ...}

Keys other than ``url``, ``meta``, ``priority``, ``method`` and ``dont_filter``
become form data, as in scrapy-redis. Whoever can push to the list is not
trusted to steer the crawler: ``meta`` may hold only ``START_URL_META_KEYS``
and never a control key (``extensions.meta``), the URL must pass the
``UrlPolicy``, the priority must be in range. A bad entry is dead-lettered with
the reason.

An entry read by a node is leased, not popped: it moves to the node's
``NAME:start_leases:NODE`` list and leaves it only in the transaction that
queues the requests built from it (or dead-letters it). A node killed while
reading start URLs loses none: its start leases go back to the start list
like its other leases.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from scrapy import FormRequest, Request

from extensions.crawlid import crawl_id_problem
from extensions.exceptions import InvalidStartURL
from extensions.frontier.frontier import now_ms
from extensions.frontier.redisops import load_script, run_named
from extensions.meta import CRAWL_ID, control_keys, control_meta_problem, priority_problem
from extensions.render.actions import render_meta_problem
from extensions.runtime import state_of
from extensions.urlpolicy import UrlPolicy

if TYPE_CHECKING:
    import redis
    from redis.client import Pipeline
    from scrapy.settings import BaseSettings

    from extensions.keys import SpiderKeys

_KNOWN_KEYS = {"url", "meta", "priority", "method", "dont_filter", "sitemap", "crawl"}
MAX_ENTRY_BYTES = 1024 * 1024  # an entry longer than this is not read as JSON


@dataclass(frozen=True)
class EntryRules:
    """What a start-URL entry may hold (from the settings)."""

    policy: UrlPolicy = field(default_factory=UrlPolicy)
    #: meta keys an entry may set; None = any key that is not a control key
    meta_keys: frozenset[str] | None = None
    #: how entries are encoded (scrapy-redis's REDIS_ENCODING)
    encoding: str = "utf-8"
    #: fetch a start URL again when it is pushed again (scrapy-redis's behaviour)
    dont_filter: bool = False

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> EntryRules:
        keys = settings.getlist("START_URL_META_KEYS")
        return cls(
            policy=UrlPolicy.from_settings(settings),
            meta_keys=None if "*" in keys else frozenset(keys),
            encoding=settings.get("REDIS_ENCODING") or "utf-8",
            dont_filter=settings.getbool("REDIS_START_URLS_DONT_FILTER"),
        )


DEFAULT_RULES = EntryRules()


def validate_url(url: str, rules: EntryRules = DEFAULT_RULES) -> str:
    """``url`` stripped, or InvalidStartURL saying what is wrong with it."""
    url = url.strip()
    if not url:
        raise InvalidStartURL("empty URL")
    if any(c.isspace() for c in url):
        raise InvalidStartURL(f"URL contains white space: {url!r:.200}")
    head = url.split("/", 1)[0]
    if ":" not in head or "." in head.split(":", 1)[0]:  # www.python.org, example.com:8080
        raise InvalidStartURL(
            f"no scheme in {url!r:.200}: did you mean {'https://' + url.lstrip('/')!r:.200}?"
        )
    problem = rules.policy.problem(url)
    if problem is None:
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 - raises ValueError for a port out of range
        except ValueError as exc:
            problem = ("malformed", f"malformed URL: {exc}")
        else:
            if not parts.hostname:
                problem = ("host", "no host in the URL")
    if problem is not None:
        kind, message = problem
        shown = "(URL withheld: it carries credentials)" if kind == "credentials" else url
        raise InvalidStartURL(f"{message}: {shown!r:.200}")
    return url


@dataclass
class StartEntry:
    url: str
    meta: dict[str, Any] = field(default_factory=dict)
    priority: int = 0
    method: str = "GET"
    dont_filter: bool = False
    formdata: dict[str, str] = field(default_factory=dict)
    #: a sitemap (or robots.txt) to read URLs from: ``"sitemap": true``
    sitemap: bool = False
    #: the crawl it starts or joins: ``"crawl": "ID"`` ("" = the crawl without an id)
    crawl: str = ""

    def to_request(self, **kwargs: Any) -> Request:
        meta = dict(self.meta)
        if self.crawl:
            meta[CRAWL_ID] = self.crawl
        common = {
            "meta": meta,
            "priority": self.priority,
            "dont_filter": self.dont_filter,
            **kwargs,
        }
        if self.formdata:
            return FormRequest(self.url, method=self.method, formdata=self.formdata, **common)
        return Request(self.url, method=self.method, **common)


def _text_of(raw: bytes | str, encoding: str = "utf-8") -> str:
    if isinstance(raw, bytes):
        if len(raw) > MAX_ENTRY_BYTES:
            raise InvalidStartURL(f"entry of {len(raw)} bytes, over {MAX_ENTRY_BYTES}")
        try:
            return raw.decode(encoding)
        except (UnicodeDecodeError, LookupError):
            name = "UTF-8" if encoding.lower().replace("-", "") == "utf8" else encoding
            raise InvalidStartURL(f"entry is not {name} text") from None
    return raw


def _checked_meta(meta: Any, rules: EntryRules) -> dict[str, Any]:
    if not isinstance(meta, dict):
        raise InvalidStartURL("'meta' must be a JSON object")
    for key in meta:
        if key in control_keys():
            raise InvalidStartURL(
                f"meta key {key!r} steers the crawler and cannot come from a start entry"
            )
        if rules.meta_keys is not None and key not in rules.meta_keys:
            raise InvalidStartURL(f"meta key {key!r} is not in START_URL_META_KEYS")
    problem = control_meta_problem(meta) or render_meta_problem(meta)
    if problem:
        raise InvalidStartURL(problem)
    return meta


def parse_entry(raw: bytes | str, rules: EntryRules = DEFAULT_RULES) -> StartEntry:
    """The entry as a StartEntry, or InvalidStartURL with the reason."""
    text = _text_of(raw, rules.encoding).strip()
    if not text.startswith("{"):
        return StartEntry(url=validate_url(text, rules), dont_filter=rules.dont_filter)
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InvalidStartURL(f"invalid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InvalidStartURL("JSON entry is not an object")
    url = data.get("url")
    if not isinstance(url, str):
        raise InvalidStartURL("JSON entry has no 'url' string")
    meta = _checked_meta(data.get("meta", {}), rules)
    priority = data.get("priority", 0)
    problem = priority_problem(priority)
    if problem:
        raise InvalidStartURL(f"'priority': {problem}")
    method = data.get("method", "GET")
    if not isinstance(method, str) or not method.isalpha() or len(method) > 20:
        raise InvalidStartURL("'method' must be an HTTP method name")
    formdata = {k: v for k, v in data.items() if k not in _KNOWN_KEYS}
    if not all(isinstance(v, str) for v in formdata.values()):
        raise InvalidStartURL("form fields must be strings")
    dont_filter = data.get("dont_filter", rules.dont_filter)
    if not isinstance(dont_filter, bool):
        raise InvalidStartURL("'dont_filter' must be true or false")
    sitemap = data.get("sitemap", False)
    if not isinstance(sitemap, bool):
        raise InvalidStartURL("'sitemap' must be true or false")
    crawl = data.get("crawl", "")
    if crawl != "":
        problem = crawl_id_problem(crawl)
        if problem:
            raise InvalidStartURL(f"'crawl': {problem}")
    return StartEntry(
        crawl=crawl,
        sitemap=sitemap,
        url=validate_url(url, rules),
        meta=meta,
        priority=priority,
        method=method.upper(),
        dont_filter=dont_filter,
        formdata=formdata,
    )


class StartLeases:
    """Redis side: take entries into this node's start leases, acknowledge them."""

    def __init__(self, server: redis.Redis, keys: SpiderKeys, node_id: str):
        self.server = server
        self.keys = keys
        self.node_id = node_id
        self.key = keys.start_leases(node_id)
        self._take = server.register_script(load_script("start_lease"))

    def take(self, count: int) -> list[bytes]:
        """Lease up to ``count`` of the oldest entries to this node."""
        return run_named(
            self._take,
            {"start_urls": self.keys.start_urls, "start_leases": self.key,
             "nodes": self.keys.nodes},
            {"count": count, "node": self.node_id, "now": now_ms(),
             "start_type": self.keys.start_type},
        )  # fmt: skip

    def ack(self, entries: list[bytes], pipe: Pipeline) -> None:
        """Queue on ``pipe`` the removal of entries whose requests are written."""
        for raw in entries:
            pipe.lrem(self.key, 1, raw)  # type: ignore[arg-type]  # bytes go as they are


class StartEntryTracker:
    """Node-local: which leased entries still have requests on their way to
    the scheduler. An entry is acknowledged once every request built from it
    was queued, filtered or dead-lettered."""

    def __init__(self) -> None:
        self._tokens = itertools.count()
        self._open: dict[str, list[Any]] = {}  # token -> [raw entry, requests not yet handled]
        self._done: list[bytes] = []

    def track(self, raw: bytes, requests: list[Request], meta_key: str) -> None:
        if not requests:
            self._done.append(raw)
            return
        token = f"{next(self._tokens)}"
        self._open[token] = [raw, len(requests)]
        for request in requests:
            request.meta[meta_key] = token

    def handled(self, token: Any) -> None:
        entry = self._open.get(token) if isinstance(token, str) else None
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] <= 0:
            del self._open[token]
            self._done.append(entry[0])

    def take_done(self) -> list[bytes]:
        done, self._done = self._done, []
        return done

    def put_back(self, done: list[bytes]) -> None:
        """A write failed: acknowledge these with the next one."""
        self._done = done + self._done

    def abandon_open(self) -> int:
        """Entries whose requests never reached the scheduler (a spider
        middleware dropped them): acknowledged, so they are not read forever."""
        count = len(self._open)
        self._done.extend(raw for raw, _ in self._open.values())
        self._open.clear()
        return count

    def __len__(self) -> int:
        return len(self._open) + len(self._done)


def tracker_for(crawler: Any) -> StartEntryTracker:
    """The one tracker of a crawler, shared by its spider and its scheduler."""
    return state_of(crawler, StartEntryTracker, StartEntryTracker)


def reads_start_urls(spidercls: type) -> bool:
    """Whether a spider class takes start URLs from Redis: ours, or scrapy-redis's
    RedisSpider / RedisCrawlSpider left as they are."""
    if getattr(spidercls, "reads_start_urls_from_redis", False):
        return True
    try:
        from scrapy_redis.spiders import RedisMixin
    except ImportError:  # scrapy-redis is not installed: only ours then
        return False
    return issubclass(spidercls, RedisMixin)
