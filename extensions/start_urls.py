"""Start URL entries as users push them to ``NAME:start_urls``.

An entry is a raw URL or scrapy-redis's JSON form::

    {"url": "https://example.com/", "meta": {...}, "priority": 10, "method": "POST", ...}

Keys other than ``url``, ``meta``, ``priority``, ``method`` and ``dont_filter``
become form data, as in scrapy-redis.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from scrapy import FormRequest, Request

from extensions.exceptions import InvalidStartURL

ALLOWED_SCHEMES = ("http", "https")
_KNOWN_KEYS = {"url", "meta", "priority", "method", "dont_filter"}


def validate_url(url: str) -> str:
    """``url`` stripped, or InvalidStartURL saying what is wrong with it."""
    url = url.strip()
    if not url:
        raise InvalidStartURL("empty URL")
    if any(c.isspace() for c in url):
        raise InvalidStartURL(f"URL contains white space: {url!r:.200}")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port out of range
    except ValueError as exc:
        raise InvalidStartURL(f"malformed URL {url!r:.200}: {exc}") from None
    if parts.scheme.lower() not in ALLOWED_SCHEMES:
        scheme = parts.scheme or "none"
        raise InvalidStartURL(f"unsupported scheme {scheme!r} in {url!r:.200} (use http or https)")
    if not parts.hostname:
        raise InvalidStartURL(f"no host in {url!r:.200}")
    return url


@dataclass
class StartEntry:
    url: str
    meta: dict[str, Any] = field(default_factory=dict)
    priority: int = 0
    method: str = "GET"
    dont_filter: bool = False
    formdata: dict[str, str] = field(default_factory=dict)

    def to_request(self, **kwargs: Any) -> Request:
        common = {
            "meta": self.meta,
            "priority": self.priority,
            "dont_filter": self.dont_filter,
            **kwargs,
        }
        if self.formdata:
            return FormRequest(self.url, method=self.method, formdata=self.formdata, **common)
        return Request(self.url, method=self.method, **common)


def parse_entry(raw: bytes | str) -> StartEntry:
    """The entry as a StartEntry, or InvalidStartURL with the reason."""
    if isinstance(raw, bytes):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidStartURL("entry is not UTF-8 text") from None
    else:
        text = raw
    text = text.strip()
    if not text.startswith("{"):
        return StartEntry(url=validate_url(text))
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InvalidStartURL(f"invalid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InvalidStartURL("JSON entry is not an object")
    url = data.get("url")
    if not isinstance(url, str):
        raise InvalidStartURL("JSON entry has no 'url' string")
    meta = data.get("meta", {})
    if not isinstance(meta, dict):
        raise InvalidStartURL("'meta' must be a JSON object")
    priority = data.get("priority", 0)
    if not isinstance(priority, int) or isinstance(priority, bool):
        raise InvalidStartURL("'priority' must be an integer")
    method = data.get("method", "GET")
    if not isinstance(method, str) or not method.isalpha():
        raise InvalidStartURL("'method' must be an HTTP method name")
    formdata = {k: v for k, v in data.items() if k not in _KNOWN_KEYS}
    if not all(isinstance(v, str) for v in formdata.values()):
        raise InvalidStartURL("form fields must be strings")
    return StartEntry(
        url=validate_url(url),
        meta=meta,
        priority=priority,
        method=method.upper(),
        dont_filter=bool(data.get("dont_filter", False)),
        formdata=formdata,
    )
