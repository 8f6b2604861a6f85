"""Webhooks, declared (``extensions/capability.py``): the settings, the keys and
the extension. How: ``events.py`` (a crawl's state changes, seen once for the
cluster, into the outbox), ``delivery.py`` (the outbox to the URLs, signed,
retried), ``extension.py`` (every node sends, none twice)."""

from __future__ import annotations

import base64
import binascii
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from extensions.capability import Capability, Key, Setting
from extensions.settingchecks import flag, number

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

SECRET_PREFIX = "whsec_"


def urls_problem(settings: BaseSettings, name: str) -> str | None:
    urls = settings.getlist(name)
    for url in urls:
        parts = urlsplit(url) if isinstance(url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            return f"{url!r:.100} is not an http(s) URL"
    return None


def secret_problem(settings: BaseSettings, name: str) -> str | None:
    secret = settings.get(name) or ""
    if not settings.getlist("WEBHOOK_URLS"):
        return None
    how = (
        'e.g. python -c "import base64, os; '
        "print('whsec_' + base64.b64encode(os.urandom(24)).decode())\""
    )
    if not secret:
        return f"needed with WEBHOOK_URLS: every event is signed ({how})"
    if not isinstance(secret, str):
        return "must be a string, whsec_ and base64"
    try:
        key = base64.b64decode(secret.removeprefix(SECRET_PREFIX) + "==", validate=True)
    except (binascii.Error, ValueError):
        return f"must be whsec_ and base64, as Standard Webhooks writes them ({how})"
    return None if len(key) >= 16 else "must hold 16 bytes or more"


CAPABILITY = Capability(
    name="webhooks",
    about="crawl events to webhooks, signed as Standard Webhooks signs them (extensions/webhooks/)",
    settings={
        "WEBHOOK_URLS": Setting(
            [],
            "URLs told of each crawl's events (crawl.started, crawl.paused, "
            "crawl.resumed, crawl.completed, crawl.failed; crawl.pages with "
            "WEBHOOK_PAGE_EVENTS), once for the cluster",
            urls_problem,
        ),
        "WEBHOOK_SECRET": Setting(
            "",
            "the key events are signed with (whsec_ and base64; Standard Webhooks' "
            "webhook-id, webhook-timestamp and webhook-signature headers)",
            secret_problem,
        ),
        "WEBHOOK_RETRIES": Setting(
            10,
            "tries after the first, 1 s after a failure and twice as long each time "
            "(at most 10 min); then the event goes to NAME:webhooks:dead",
            number(int, 0),
        ),
        "WEBHOOK_PAGE_EVENTS": Setting(
            False,
            "also tell the pages fetched, in crawl.pages events (an event per crawl id "
            "and batch, each page in one event)",
            flag,
        ),
        "WEBHOOK_PAGE_BATCH": Setting(
            100,
            "pages a crawl.pages event holds at most (a batch waits 5 s at most to fill)",
            number(int, 1, 10_000),
        ),
        "WEBHOOK_TIMEOUT": Setting(
            10.0, "seconds a URL has to answer an event", number(float, 0, above=True)
        ),
    },
    keys={
        "webhooks": Key(
            "%(name)s:webhooks",
            "stream",
            "the outbox: an entry per event and URL still to send (id, type, url, body, "
            "attempt), read by the nodes' consumer group senders",
            "webhooks/events.py (webhook_event.lua), webhooks/delivery.py",
        ),
        "webhooks_states": Key(
            "%(name)s:webhooks:states",
            "hash",
            'crawl id ("" the crawl without one) -> "STATE EVENTS": the state last told '
            "and how many events it has had",
            "webhook_event.lua (the node that saw a crawl's state change first)",
        ),
        "webhooks_later": Key(
            "%(name)s:webhooks:later",
            "zset",
            "events to send again after a failure (JSON) -> when (ms)",
            "webhooks/delivery.py",
        ),
        "webhooks_pages": Key(
            "%(name)s:webhooks:pages",
            "list",
            "WEBHOOK_PAGE_EVENTS: pages fetched, to be told (JSON: url, crawl, "
            "dead_lettered, at), each pushed with the flush that releases its lease",
            "webhooks/pages.py (each node); taken by webhook_pages.lua",
        ),
        "webhooks_dead": Key(
            "%(name)s:webhooks:dead",
            "list",
            "events no try delivered (JSON: id, type, url, attempts, error, body)",
            "webhooks/delivery.py",
        ),
    },
    extensions={"extensions.webhooks.extension.Webhooks": 600},
    frontier_parts={"extensions.webhooks.pages.PagesPart": 800},
)
