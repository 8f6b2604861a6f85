"""What a site says its content may be used for: ``Content-Signal`` lines
(``search=yes, ai-train=no``) and the IETF's ``Content-Usage`` (``train-ai=n``),
in its robots.txt (for every crawler, or in the group of this one's token) and
in a response's headers, which say more of that page than the robots.txt does
of the whole host.

Read as robots.txt is read: names case-insensitively, a line applies to the
``User-agent`` group it is in (a line before any group, to all), the crawler's
own group over ``*``. What comes out is one dict of preference -> value, the
keys and values lower-cased, each bounded, at most ``PREFERENCES_KEPT``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

TOKEN = re.compile(r"[A-Za-z0-9_.-]+")
FIELDS = {b"content-signal", b"content-usage"}
PREFERENCES_KEPT = 32
TEXT_KEPT = 64  # characters of a preference's name or value
SCANNED = 512 * 1024  # bytes of a robots.txt read, as Protego does at most


def agent_token(agent: str) -> str:
    """The crawler's token in robots.txt and robots meta tags: the product
    token of its user agent string, lower case ('' for none)."""
    match = TOKEN.search(agent or "")
    return match.group(0).lower() if match else ""


def crawler_token(settings: Any) -> str:
    """This crawler's token: ``ROBOTSTXT_USER_AGENT``'s, else ``USER_AGENT``'s."""
    return agent_token(settings.get("ROBOTSTXT_USER_AGENT") or settings.get("USER_AGENT") or "")


def preferences(value: str) -> dict[str, str]:
    """``search=yes, ai-train=no`` (or ``;``-separated) -> {search: yes, ai-train: no}."""
    found: dict[str, str] = {}
    for part in value.replace(";", ",").split(","):
        name, equals, setting = part.partition("=")
        name, setting = name.strip().lower()[:TEXT_KEPT], setting.strip().lower()[:TEXT_KEPT]
        if equals and name and setting and len(found) < PREFERENCES_KEPT:
            found[name] = setting
    return found


def robots_usage(body: bytes, token: str) -> dict[str, str]:
    """The usage preferences a robots.txt states for the crawler named ``token``."""
    everyone: dict[str, str] = {}
    ours: dict[str, str] = {}
    agents: set[str] = set()
    in_rules = False  # a User-agent after rules starts a new group
    for raw in body[:SCANNED].splitlines():
        line = raw.split(b"#", 1)[0].strip()
        name, colon, value = line.partition(b":")
        if not colon:
            continue
        name = name.strip().lower()
        text = value.strip().decode("utf-8", "replace")
        if name == b"user-agent":
            if in_rules:
                agents, in_rules = set(), False
            agents.add(text.lower())
        else:
            in_rules = bool(agents)
            if name in FIELDS:
                found = preferences(text)
                if not agents or "*" in agents:
                    everyone.update(found)
                if token and token in agents:
                    ours.update(found)
    return {**everyone, **ours}


def header_usage(values: Iterable[bytes]) -> dict[str, str]:
    """The preferences ``Content-Signal`` / ``Content-Usage`` headers state."""
    found: dict[str, str] = {}
    for raw in values:
        found.update(preferences(raw.decode("latin-1")))
    return dict(list(found.items())[:PREFERENCES_KEPT])
