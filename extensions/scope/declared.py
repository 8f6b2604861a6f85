"""Crawl scope as data, declared (``extensions/capability.py``): its setting,
its keys, its frontier part, its middlewares and the meta key its requests
carry; what a scope document holds: ``document.py``; how a URL is judged:
``rules.py``."""

from __future__ import annotations

from typing import Any

from extensions.capability import Capability, Key, Setting
from extensions.settingchecks import number

#: a scoped crawl's request: [the seed it descends from, its hops from it, hops
#: outside the scope that led to it, its seed's own scope document id or ""]
#: (``rules.py``)
SCOPE_TRAIL = "_scope"


def trail_ok(value: Any) -> bool:
    """Whether a queue entry's trail is one the nodes can judge by."""
    if not (isinstance(value, list) and len(value) == 4):
        return False
    seed, hops, out, doc = value
    numbers = all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in (hops, out))
    return numbers and isinstance(seed, str) and isinstance(doc, str)


CAPABILITY = Capability(
    name="scope",
    about="crawl scope as data (extensions/scope/)",
    settings={
        "SCOPE_REFRESH": Setting(
            0.5,
            "seconds: how often a node looks whether a crawl's scope changed (one HGET), "
            "writes what it counted and reads a limited crawl's pages and bytes",
            number(float, 0.05, 60),
        ),
    },
    keys={
        "scope": Key(
            "%(name)s:scope",
            "hash",
            'crawl id ("" for the crawl without one) -> its scope document (JSON); '
            "seed:ID -> a seed's own scope document; #version -> bumped at each change; "
            "#since:CRAWL -> when the crawl was first given a scope (ms, for max_seconds)",
            "scrapy seed --scope, scrapy scope, the console; each node (a seed's own scope)",
            crawl_state=True,
        ),
        "scope_counts": Key(
            "%(name)s:scope_counts",
            "hash",
            "CRAWL|pages and CRAWL|bytes fetched by a crawl with limits; CRAWL|REASON: "
            "requests its scope refused (excluded, depth, outside, limit)",
            "each node (scope/state.py), every SCOPE_REFRESH seconds",
            crawl_state=True,
        ),
        "scope_hosts": Key(
            "%(name)s:scope_hosts",
            "hash",
            "CRAWL|HOST -> pages fetched of HOST by a crawl with max_pages_per_host",
            "each node (scope/state.py), every SCOPE_REFRESH seconds",
            crawl_state=True,
        ),
    },
    frontier_parts={"extensions.scope.part.ScopePart": 150},
    spider_middlewares={"extensions.scope.middleware.ScopeMiddleware": 975},
    downloader_middlewares={"extensions.scope.middleware.ScopeFetches": 950},
    control_meta={SCOPE_TRAIL: trail_ok},
)
