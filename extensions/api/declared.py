"""The Firecrawl-compatible API, declared (``extensions/capability.py``): its
settings, its keys, the spider middleware that keeps each API page's result and
the part that writes it with the flush that releases the page. How:
``apikeys.py`` (keys and their hashes, per-key rates), ``jobs.py`` (an API call
as a crawl id), ``capture.py`` and ``part.py`` (the results), ``app.py`` (the
routes), ``commands/api.py``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from extensions.capability import Capability, Key, Setting
from extensions.settingchecks import number

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

#: crawl ids an API call makes start so (``api-`` and 24 hex digits)
PREFIX = "api-"


def _keys(settings: BaseSettings, name: str) -> str | None:
    for entry in settings.getlist(name):
        if not isinstance(entry, str) or len(entry) < 16 or not entry.isprintable():
            return "each entry is a key (16 characters or more) or its sha256:HASH"
    return None


def _quotas(settings: BaseSettings, name: str) -> str | None:
    try:
        quotas = settings.getdict(name)
    except (ValueError, TypeError):
        return "a dict: key or sha256:HASH -> {'rate_limit': N, 'max_pages': N}"
    for key, given in quotas.items():
        if not isinstance(key, str) or not isinstance(given, dict):
            return "a dict: key or sha256:HASH -> {'rate_limit': N, 'max_pages': N}"
        unknown = set(given) - {"rate_limit", "max_pages"}
        if unknown:
            return f"{key[:20]}...: no such figure {sorted(unknown)[0]!r} (rate_limit, max_pages)"
        if not all(type(v) is int and v >= 1 for v in given.values()):
            return f"{key[:20]}...: each figure a whole number, 1 or more"
    return None


CAPABILITY = Capability(
    name="api",
    about="a Firecrawl-compatible API over the cluster's crawls (extensions/api/)",
    settings={
        "API_KEYS": Setting(
            [],
            "the keys `scrapy api` takes (Authorization: Bearer KEY): each a key or, better "
            "at rest, its sha256:HEX hash as `scrapy api --new-key` prints them",
            _keys,
        ),
        "API_SPIDER": Setting("web", "the spider whose nodes fetch what API calls ask"),
        "API_RATE_LIMIT": Setting(
            120, "calls one key may make a minute (429 past it)", number(int, 1)
        ),
        "API_KEY_QUOTAS": Setting(
            {},
            "a key's own quota, by the key or its sha256: hash: {'rate_limit': calls a "
            "minute, 'max_pages': the most pages its crawl or map may ask for}; what it "
            "leaves out is API_RATE_LIMIT's and API_MAX_PAGES'",
            _quotas,
        ),
        "API_MAX_PAGES": Setting(
            10_000, "the most pages one API crawl may ask for (its limit)", number(int, 1)
        ),
        "API_SCRAPE_TIMEOUT": Setting(
            60.0,
            "seconds POST /v2/scrape waits for its page at most (less when the call's "
            "own timeout says so)",
            number(float, 0, above=True),
        ),
        "API_RESULTS_TTL": Setting(
            86_400,
            "seconds an API crawl's results are kept in Redis after its last page",
            number(int, 60),
        ),
    },
    keys={
        "api_jobs": Key(
            "%(name)s:api:jobs",
            "hash",
            "API crawl id -> what the call asked (JSON: kind, url, formats, limit, key)",
            "scrapy api (api/jobs.py)",
        ),
        "api_results": Key(
            "%(name)s:api:results:%(crawl)s",
            "list",
            "an API crawl's pages, each a Firecrawl document (JSON), in the order fetched",
            "the nodes, with the flush that releases each page (api/part.py)",
        ),
        "api_rate": Key(
            "%(name)s:api:rate:%(key)s",
            "string",
            "calls a key made in the current minute (expires with it)",
            "scrapy api (api/apikeys.py)",
        ),
    },
    spider_middlewares={"extensions.api.capture.ApiCaptureMiddleware": 40},
    frontier_parts={"extensions.api.part.ApiResultsPart": 130},
)
