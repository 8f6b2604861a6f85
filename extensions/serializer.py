"""Requests as JSON, never pickle: whoever can write to Redis must not be able to
run code on a crawler node.

Callbacks and errbacks are stored by name and looked up on the spider when the
request is read back. Fields at their default value are left out to keep the
queue small. A request whose ``meta`` or ``cb_kwargs`` hold something JSON cannot
carry raises :class:`SerializationError` naming where it sits.
"""

from __future__ import annotations

import base64
import json
import sys
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from scrapy import Request
from scrapy.utils.request import request_from_dict

from extensions.exceptions import SerializationError

if TYPE_CHECKING:
    from scrapy import Spider

# Attributes left out when they hold these values.
_DEFAULTS: dict[str, Any] = {
    "callback": None,
    "errback": None,
    "method": "GET",
    "headers": {},
    "body": b"",
    "cookies": {},
    "meta": {},
    "encoding": "utf-8",
    "priority": 0,
    "dont_filter": False,
    "flags": [],
    "cb_kwargs": {},
}


# Never written to Redis: proxy credentials (Scrapy moves them into this header).
SECRET_HEADERS = {b"proxy-authorization"}
# Per-attempt proxy choices of the rotating proxy middleware: chosen afresh each try.
ROTATION_META = ("proxy", "_rotating_proxy", "download_slot", "_auth_proxy", "_ban")


def _without_secrets(meta: dict[str, Any]) -> dict[str, Any]:
    if meta.get("_rotating_proxy"):
        return {k: v for k, v in meta.items() if k not in ROTATION_META}
    proxy = meta.get("proxy")
    if isinstance(proxy, str) and "@" in proxy:
        # A request's own proxy keeps its address; its credentials stay out of Redis.
        parts = urlsplit(proxy)
        host = f"{parts.hostname}:{parts.port}" if parts.port else str(parts.hostname)
        return {**meta, "proxy": urlunsplit((parts.scheme, host, parts.path, "", ""))}
    return meta


def _check_json(value: Any, where: str) -> None:
    """Raise SerializationError unless ``value`` survives a JSON round trip."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return
    if isinstance(value, list):
        for index, element in enumerate(value):
            _check_json(element, f"{where}[{index}]")
        return
    if isinstance(value, dict):
        for key, element in value.items():
            if not isinstance(key, str):
                raise SerializationError(
                    f"{where} has a key of type {type(key).__name__} ({key!r}); "
                    "only string keys can be stored as JSON"
                )
            _check_json(element, f"{where}[{key!r}]")
        return
    raise SerializationError(
        f"{where} holds a {type(value).__name__} ({value!r:.80}), which cannot be "
        "stored as JSON; keep only str, int, float, bool, None, lists and dicts there"
    )


def request_to_dict(request: Request, spider: Spider | None = None) -> dict[str, Any]:
    try:
        raw = request.to_dict(spider=spider)
    except ValueError as exc:  # a callback that is not a method of the spider
        raise SerializationError(f"{request.url}: {exc}") from None
    out: dict[str, Any] = {}
    for field, value in raw.items():
        if field in _DEFAULTS and value == _DEFAULTS[field]:
            continue
        if field == "headers":
            headers = {
                key.decode("latin-1"): [v.decode("latin-1") for v in values]
                for key, values in value.items()
                if key.lower() not in SECRET_HEADERS
            }
            if headers:
                out["headers"] = headers
        elif field == "meta":
            meta = _without_secrets(value)
            if meta:
                out["meta"] = meta
        elif field == "body":
            try:
                out["body"] = value.decode("utf-8")
            except UnicodeDecodeError:
                out["body64"] = base64.b64encode(value).decode("ascii")
        elif field in ("callback", "errback") and not isinstance(value, str):
            raise SerializationError(
                f"{request.url}: {field} {value!r} is not a method of the spider, "
                "so it cannot be stored by name"
            )
        else:
            out[field] = value
    for field in ("meta", "cb_kwargs", "cookies", "flags"):
        if field in out:
            _check_json(out[field], f"{request.url}: request.{field}")
    return out


def dumps_request(request: Request, spider: Spider | None = None) -> bytes:
    """JSON bytes for ``request``; raises SerializationError naming what failed."""
    return json.dumps(request_to_dict(request, spider), separators=(",", ":")).encode()


def _request_class(path: str) -> type[Request]:
    # Only classes of modules already imported, so a value in Redis can never
    # make a node import (and so run) a module of its choosing.
    module_name, _, class_name = path.rpartition(".")
    module = sys.modules.get(module_name)
    cls = getattr(module, class_name, None) if module else None
    if not (isinstance(cls, type) and issubclass(cls, Request)):
        raise SerializationError(f"unknown request class {path!r}")
    return cls


def loads_request(data: bytes | str, spider: Spider | None = None) -> Request:
    """The request stored by :func:`dumps_request`.

    Raises SerializationError for data that is not such a request (garbage,
    a missing callback method, an unknown request class).
    """
    try:
        obj = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise SerializationError(f"not JSON: {exc}") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("url"), str):
        raise SerializationError("not a serialized request (no 'url')")
    if "body64" in obj:
        obj["body"] = base64.b64decode(obj.pop("body64"))
    elif "body" in obj:
        obj["body"] = obj["body"].encode("utf-8")
    if "_class" in obj:
        cls = _request_class(obj["_class"])
        obj["_class"] = f"{cls.__module__}.{cls.__name__}"
    try:
        return request_from_dict(obj, spider=spider)
    except (TypeError, ValueError) as exc:
        raise SerializationError(f"cannot rebuild request for {obj['url']}: {exc}") from None
