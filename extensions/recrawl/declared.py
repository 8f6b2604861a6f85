"""Recrawls, declared (``extensions/capability.py``): their settings with their
checks, their keys, their frontier part and their middlewares; what each does:
the package's modules (``__init__.py``)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from extensions.capability import Capability, Key, Setting
from extensions.settingchecks import choice, flag, names, number, number_map

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

RULES_FORM = 'URL regexes to seconds, e.g. {"/news/": 3600}'


def _rules(settings: BaseSettings, name: str) -> str | None:
    rules, problem = number_map(settings, name, RULES_FORM, "intervals (0: never again)")
    for pattern in rules or ():
        try:
            re.compile(pattern)
        except re.error as exc:
            return f"{pattern!r} is not a regular expression: {exc}"
    return problem


CAPABILITY = Capability(
    name="recrawl",
    about="recrawls (extensions/recrawl/)",
    settings={
        "RECRAWL_AFTER": Setting(
            0.0, "seconds until a fetched page is fetched again; 0 = never", number(float, 0)
        ),
        "RECRAWL_RULES": Setting({}, "URL regex -> seconds, before RECRAWL_AFTER", _rules),
        "RECRAWL_ADAPTIVE": Setting(False, "unchanged pages wait longer, changed ones less", flag),
        "RECRAWL_MIN": Setting(
            3600.0, "seconds: the adaptive interval's floor", number(float, 0, above=True)
        ),
        "RECRAWL_MAX": Setting(
            30 * 86400.0,
            "seconds: the adaptive interval's ceiling",
            number(float, 0, above=True),
        ),
        "RECRAWL_FINGERPRINT": Setting(
            "body",
            'what tells a change: "body", or "items" the page yields',
            choice("body", "items"),
        ),
        "RECRAWL_IGNORE_FIELDS": Setting(
            [], "item fields that are not content (a timestamp)", names
        ),
        "RECRAWL_STORE": Setting(
            "auto",
            "where pages' recrawl state lives: redis, mongo (auto: mongo if MONGO_URI)",
            choice("auto", "redis", "mongo"),
        ),
        "RECRAWL_CLAIM_TIMEOUT": Setting(
            600.0,
            "s: due pages a node took from MongoDB are its own this long",
            number(float, 0, above=True),
        ),
        "RECRAWL_FEED_BATCH": Setting(
            500, "due pages a heartbeat moves into the queue, per shard", number(int, 1)
        ),
    },
    keys={
        "revisit": Key(
            "%(name)s:revisit",
            "hash",
            'RECRAWL_AFTER: request fingerprint (hex) -> "GROUP\\nJSON", the request to '
            "fetch again, its validators and content fingerprint in its meta ``recrawl``; "
            'with RECRAWL_STORE = "mongo", only the pages moved from MongoDB into the '
            "queue: fingerprint -> group",
            "the scheduler's flush (recrawl/part.py); recrawl_feed.lua, recrawl_requeue.lua",
            sharded=True,
            crawl_state=True,
        ),
        "due": Key(
            "%(name)s:due",
            "zset",
            "RECRAWL_AFTER: request fingerprint -> when it is due again (ms since epoch)",
            "the scheduler's flush (recrawl/part.py); recrawl_feed.lua; scrapy recrawl; "
            "sitemaps' lastmod",
            sharded=True,
            crawl_state=True,
        ),
    },
    frontier_parts={"extensions.recrawl.part.RecrawlPart": 300},
    downloader_middlewares={
        # below the retry and compression middlewares: sees the final, decoded answer
        "extensions.recrawl.middleware.RecrawlMiddleware": 540,
    },
    spider_middlewares={
        # next to the spider: hashes the items it yields, before anything drops one
        "extensions.recrawl.middleware.RecrawlItemsMiddleware": 990,
    },
)
