"""Which queue a request joins: one per host by default (``FRONTIER_QUEUE_BY``).

Politeness, fairness and budgets are decided per group: ``"host"`` (the URL's
host name), ``"domain"`` (its registered domain by the Public Suffix List, so
``a.example.co.uk`` and ``b.example.co.uk`` share one, ``alice.github.io`` and
``bob.github.io`` do not), or ``"slot"`` (the request's ``download_slot``
meta when a spider sets one, for grouping by IP or by anything else it knows;
else the host).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from extensions.crawlid import RENDER_MARK, crawl_group
from extensions.frontier.domains import registered_domain
from extensions.meta import CRAWL_ID, RENDER

QUEUE_BY = ("host", "domain", "slot")
MAX_GROUP_LENGTH = 255  # the longest host name DNS allows


def clean(group: str) -> str:
    """A group name safe in a key and in a lease (no newline, no ``#``: it marks
    a crawl id, no ``!``: it marks the render lane; bounded)."""
    group = group.replace("\n", " ").replace("\r", " ").replace("#", "%23").replace("!", "%21")
    return group[:MAX_GROUP_LENGTH]


def group_for(url: str, slot: Any = None, by: str = "host") -> str:
    if by == "slot" and isinstance(slot, str) and slot:
        return clean(slot)
    try:
        host = (urlsplit(url).hostname or "").lower()
    except ValueError:
        host = ""
    return clean(registered_domain(host) if by == "domain" else host)


def queue_group_for(url: str, meta: dict[str, Any], by: str = "host") -> str:
    """The queue a request with this URL and meta joins: its group, in its crawl,
    in the render lane when a browser must fetch it (``meta["render"]``)."""
    crawl = meta.get(CRAWL_ID)
    group = group_for(url, meta.get("download_slot"), by)
    if meta.get(RENDER) is True:
        group += RENDER_MARK
    return crawl_group(group, crawl or None)
