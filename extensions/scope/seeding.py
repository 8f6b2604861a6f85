"""What ``scrapy seed --scope FILE`` (and the console's seed form) does with a
scope: read and check it before anything is pushed, check the scopes start
entries carry of their own (``"meta": {"scope": {...}}``), and add the seeds'
sitemaps when the scope asks for them."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from extensions.scope.document import Scope, ScopeError, parse
from extensions.scope.state import SEED_SCOPE

if TYPE_CHECKING:
    import redis

    from extensions.keys import SpiderKeys

MAX_SCOPE_FILE = 1024 * 1024


def read_scope_file(path: str) -> Scope:
    """The scope in FILE, or ScopeError naming the field (or the file) that is wrong."""
    try:
        with open(path, encoding="utf-8") as stream:
            raw = stream.read(MAX_SCOPE_FILE + 1)
    except (OSError, UnicodeDecodeError) as exc:
        raise ScopeError(f"--scope {path}: cannot be read: {exc}") from None
    if len(raw) > MAX_SCOPE_FILE:
        raise ScopeError(f"--scope {path}: over {MAX_SCOPE_FILE} bytes")
    return parse(raw)


def entry_scope_problem(entry: str) -> str | None:
    """What is wrong with the scope a JSON start entry carries in its meta, or None."""
    text = entry.strip()
    if not text.startswith("{"):
        return None
    try:
        meta = json.loads(text).get("meta")
    except (ValueError, AttributeError, RecursionError):
        return None  # refused with its own reason when the entry is checked
    if not isinstance(meta, dict) or SEED_SCOPE not in meta:
        return None
    try:
        parse(meta[SEED_SCOPE])
    except ScopeError as exc:
        return f"meta['scope']: {exc}"
    return None


def with_sitemaps(entries: list[str], scope: Scope, crawl: str) -> list[str]:
    """``sitemaps``: "include" adds the robots.txt of each seed's host, read
    for its sitemaps; "only" pushes those alone (the seeds are not fetched, and
    what the sitemaps list is fetched without following its links)."""
    if scope.sitemaps not in ("include", "only"):
        return entries
    robots = []
    for entry in entries:
        url = entry.strip()
        if url.startswith("{"):
            try:
                url = json.loads(url).get("url", "")
            except (ValueError, AttributeError, RecursionError):
                continue
        try:
            parts = urlsplit(url)
        except ValueError:
            continue
        if parts.scheme and parts.netloc:
            robots.append(f"{parts.scheme}://{parts.netloc}/robots.txt")
    sitemaps = [
        json.dumps({"url": url, "sitemap": True, **({"crawl": crawl} if crawl else {})})
        for url in dict.fromkeys(robots)
    ]
    return sitemaps if scope.sitemaps == "only" else [*entries, *sitemaps]


def store_crawl_scope(server: redis.Redis, keys: SpiderKeys, crawl: str, scope: Scope) -> None:
    from extensions.scope.store import ScopeStore

    ScopeStore(server, keys).set_crawl_scope(crawl, scope)
