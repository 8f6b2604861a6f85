"""Which queue a request joins: one per host by default (``FRONTIER_QUEUE_BY``).

Politeness, fairness and budgets are decided per group: ``"host"`` (the URL's
host name), ``"domain"`` (its registered domain, so ``a.example.com`` and
``b.example.com`` share one), or ``"slot"`` (the request's ``download_slot``
meta when a spider sets one, for grouping by IP or by anything else it knows;
else the host).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from extensions.crawlid import RENDER_MARK, crawl_group
from extensions.meta import CRAWL_ID, RENDER

QUEUE_BY = ("host", "domain", "slot")
MAX_GROUP_LENGTH = 255  # the longest host name DNS allows

# Second-level labels under which country-code domains are registered
# (example.co.uk); a heuristic, not the whole public suffix list.
_SECOND_LEVEL = frozenset(
    {"ac", "co", "com", "edu", "gov", "net", "org", "ne", "or", "go", "gob", "nic", "mil"}
)


def registered_domain(host: str) -> str:
    """``example.co.uk`` for ``www.example.co.uk``: the last two labels, or three
    under a country code's common second level; IP addresses stay whole."""
    labels = host.split(".")
    if len(labels) <= 2 or host.replace(".", "").isdigit() or ":" in host:
        return host
    keep = 3 if len(labels[-1]) == 2 and labels[-2] in _SECOND_LEVEL else 2
    return ".".join(labels[-keep:])


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
