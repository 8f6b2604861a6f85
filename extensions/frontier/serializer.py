"""Requests as JSON, never pickle: whoever can write to Redis must not be able to
run code on a crawler node.

Callbacks and errbacks are stored by name and looked up on the spider when the
request is read back. Fields at their default value are left out to keep the
queue small. A request whose ``meta`` or ``cb_kwargs`` hold something JSON cannot
carry (``extensions.frontier.values``: tuples, sets, dates, decimals, bytes
and dicts with other keys are carried) raises :class:`SerializationError`
naming where it sits.
"""

from __future__ import annotations

import base64
import codecs
import json
import sys
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from scrapy import Request, Spider
from scrapy.spiders import CrawlSpider, SitemapSpider
from scrapy.utils.request import request_from_dict

from extensions.exceptions import SerializationError
from extensions.frontier import values
from extensions.meta import control_meta_problem, priority_problem
from extensions.render.actions import render_meta_problem, spider_scripts

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


# Private methods Scrapy's own spider classes use as callbacks; a spider class of
# this stack names its own in ``private_callbacks``.
_PRIVATE_CALLBACKS: tuple[tuple[type, frozenset[str]], ...] = (
    (CrawlSpider, frozenset({"_callback", "_errback"})),
    (SitemapSpider, frozenset({"_parse_sitemap"})),
)
# Packages whose spider classes' attributes are API, not callbacks: Scrapy's,
# scrapy-redis's and this stack's.
_FRAMEWORKS = frozenset({"scrapy", "scrapy_redis", __name__.split(".")[0]})
# hooks a spider may define that Scrapy calls itself, with other arguments
_HOOKS = frozenset({"start_requests", "start", "closed", "opened", "make_requests_from_url"})


def _private_allowed(spider: Spider, name: str) -> bool:
    if name in getattr(type(spider), "private_callbacks", ()):
        return True
    return any(name in names for cls, names in _PRIVATE_CALLBACKS if isinstance(spider, cls))


_API_OF: dict[type, frozenset[str]] = {}  # per spider class


def _spider_api(spidercls: type) -> frozenset[str]:
    """What the spider's framework classes define: never a callback, even where
    the spider overrides it."""
    api = _API_OF.get(spidercls)
    if api is None:
        names = set(dir(Spider)) | set(dir(CrawlSpider)) | _HOOKS
        for cls in spidercls.__mro__:
            if cls.__module__.split(".")[0] in _FRAMEWORKS:
                names |= set(vars(cls))
        api = _API_OF[spidercls] = frozenset(names - {"parse", "parse_start_url"})
    return api


def callback_problem(spider: Spider, name: Any) -> str | None:
    """Why ``name`` may not be a request's callback on ``spider``, or None.

    Callbacks resolve only to public methods the spider defines for the purpose:
    not to private attributes, nor to Scrapy's or the stack's own API (a queue
    entry naming ``__init__`` or ``start_requests`` must not reach them).
    """
    if not isinstance(name, str) or not name.isidentifier():
        return f"callback {name!r:.80} is not a method name"
    allowed_private = _private_allowed(spider, name)
    if name.startswith("_") and not allowed_private:
        return f"callback {name!r} is private; only public methods of the spider are callbacks"
    if name in _spider_api(type(spider)) and not allowed_private:
        return f"callback {name!r} is part of the spider API, not a callback"
    if not callable(getattr(type(spider), name, None)):
        return f"callback {name!r} is not a method of spider {spider.name!r}"
    return None


def _method_name(spider: Spider | None, func: Any) -> str | None:
    """The name under which ``func`` is a method of ``spider``, found directly;
    None when it is not that simple (Scrapy's own lookup then decides)."""
    inner = getattr(func, "__func__", None)
    if spider is None or inner is None or getattr(func, "__self__", None) is not spider:
        return None
    name = getattr(inner, "__name__", None)
    if isinstance(name, str) and getattr(getattr(spider, name, None), "__func__", None) is inner:
        return name
    return None


def _to_dict(request: Request, spider: Spider | None) -> dict[str, Any]:
    """``request.to_dict(spider=spider)``, without its cost per request: Scrapy
    finds a callback's name by listing every attribute of the spider."""
    names: dict[str, Any] = {}
    for field in ("callback", "errback"):
        func = getattr(request, field)
        if callable(func):
            names[field] = _method_name(spider, func)
            if names[field] is None:
                return request.to_dict(spider=spider)
        else:
            names[field] = func
    out: dict[str, Any] = {"url": request.url, **names, "headers": dict(request.headers)}
    for attr in request.attributes:
        out.setdefault(attr, getattr(request, attr))
    if type(request) is not Request:
        out["_class"] = f"{type(request).__module__}.{type(request).__name__}"
    return out


def request_to_dict(request: Request, spider: Spider | None = None) -> dict[str, Any]:
    try:
        raw = _to_dict(request, spider)
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
        elif field in ("callback", "errback") and spider is not None:
            problem = callback_problem(spider, value)
            if problem:
                raise SerializationError(f"{request.url}: {problem}")
            out[field] = value
        else:
            out[field] = value
    values.encode_fields(out, f"{request.url}: ")
    for field in ("cookies", "flags"):
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


def _is_str_map(value: Any, values: type | tuple[type, ...]) -> bool:
    return isinstance(value, dict) and all(
        isinstance(k, str) and isinstance(v, values) for k, v in value.items()
    )


def _headers_ok(value: Any) -> bool:
    return isinstance(value, dict) and all(
        isinstance(k, str)
        and (isinstance(v, str) or (isinstance(v, list) and all(isinstance(x, str) for x in v)))
        for k, v in value.items()
    )


def _cookies_ok(value: Any) -> bool:
    scalar = (str, int, float)
    if isinstance(value, list):
        return all(_is_str_map(c, (str, int, float, bool, type(None))) for c in value)
    return _is_str_map(value, scalar)


# Type checks for each stored field; anything else in an entry is refused.
_FIELD_CHECKS: dict[str, Any] = {
    "url": lambda v: isinstance(v, str) and bool(v),
    "method": lambda v: isinstance(v, str) and v.isalpha() and len(v) <= 20,
    "headers": _headers_ok,
    "body": lambda v: isinstance(v, str),
    "body64": lambda v: isinstance(v, str),
    "cookies": _cookies_ok,
    "meta": lambda v: isinstance(v, dict),
    "encoding": lambda v: isinstance(v, str) and _known_codec(v),
    "priority": lambda v: priority_problem(v) is None,
    "dont_filter": lambda v: isinstance(v, bool),
    "flags": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
    "cb_kwargs": lambda v: isinstance(v, dict),
    "callback": lambda v: v is None or isinstance(v, str),
    "errback": lambda v: v is None or isinstance(v, str),
    "_class": lambda v: isinstance(v, str),
    # FormRequest and JsonRequest keep these as attributes of their own
    "dumps_kwargs": lambda v: isinstance(v, dict),
}


def _known_codec(name: str) -> bool:
    try:
        codecs.lookup(name)
    except LookupError:
        return False
    return True


def entry_problem(obj: Any) -> str | None:
    """Why a decoded queue entry is not a request a node can run, or None."""
    if not isinstance(obj, dict) or not isinstance(obj.get("url"), str):
        return "not a serialized request (no 'url')"
    for field, value in obj.items():
        check = _FIELD_CHECKS.get(field)
        if check is None:
            return f"unexpected field {field!r:.80}"
        if not check(value):
            return f"field {field!r} holds {value!r:.80}, which is not valid there"
    if "meta" in obj:
        return control_meta_problem(obj["meta"]) or render_meta_problem(obj["meta"])
    return None


def loads_request(data: bytes | str, spider: Spider | None = None) -> Request:
    """The request stored by :func:`dumps_request`.

    Raises SerializationError for data that is not such a request: garbage,
    fields of the wrong type, control meta of the wrong type, a callback that
    is not a public method of the spider, an unknown request class. A queue
    entry may have been written by anyone who can write to Redis.
    """
    try:
        obj = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise SerializationError(f"not JSON: {exc}") from None
    problem = entry_problem(obj)
    if problem:
        raise SerializationError(problem)
    url = obj["url"]
    if values.may_hold_tagged(data):
        for field in ("meta", "cb_kwargs"):
            if field in obj:
                obj[field] = values.decode_field(obj[field], f"{url:.200}: {field}")
    if spider is not None:
        problem = render_meta_problem(obj.get("meta") or {}, spider_scripts(spider))
        if problem:
            raise SerializationError(f"{url:.200}: {problem}")
        for field in ("callback", "errback"):
            if obj.get(field):
                problem = callback_problem(spider, obj[field])
                if problem:
                    raise SerializationError(f"{url:.200}: {problem}")
    try:
        if "body64" in obj:
            obj["body"] = base64.b64decode(obj.pop("body64"), validate=True)
        elif "body" in obj:
            obj["body"] = obj["body"].encode("utf-8")
    except (ValueError, UnicodeEncodeError) as exc:
        raise SerializationError(f"{url:.200}: unreadable body: {exc}") from None
    if "_class" in obj:
        cls = _request_class(obj["_class"])
        obj["_class"] = f"{cls.__module__}.{cls.__name__}"
    try:
        return request_from_dict(obj, spider=spider)
    # Hostile data may fail anywhere in Scrapy's constructors: all of it is the entry's fault.
    except Exception as exc:
        raise SerializationError(f"cannot rebuild request for {url:.200}: {exc}") from None
