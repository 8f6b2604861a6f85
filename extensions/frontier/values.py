"""The inert Python values a request's ``meta`` and ``cb_kwargs`` carry in
practice, as JSON, and back as the same types.

JSON has no tuple, set, date, decimal or bytes, and only string keys. Each such
value is written as an object of one key naming its type, as MongoDB's Extended
JSON does (``{"$tuple": [1, 2]}``, ``{"$datetime": "2026-12-01T10:00:00+00:00"}``);
a dict with keys JSON cannot hold, or one that looks like such an object, is
written as ``{"$dict": [[key, value], ...]}``. Reading builds only these types,
from their plain parts: a queue entry may have been written by anyone who can
write to Redis, and nothing in it picks a class.

``str`` subclasses (lxml's smart strings: a ``CrawlSpider`` link's text) are
written, and read back, as ``str``; an aware datetime keeps its UTC offset, not
its zone's name.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import decimal
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from extensions.exceptions import SerializationError

_PLAIN = (str, int, float, bool, type(None))


class Unencodable(Exception):
    """A value with no JSON form; ``path`` says where it sits."""

    def __init__(self, value: Any):
        super().__init__(value)
        self.value = value
        self.path: list[str] = []

    def at(self, where: str) -> str:
        place = where + "".join(reversed(self.path))
        return (
            f"{place} holds a {type(self.value).__name__} ({self.value!r:.80}), which cannot "
            "be stored: keep to str, numbers, bool, None, lists, tuples, sets, dicts, "
            "dates and times, decimals and bytes there"
        )


def _items(value: dict[Any, Any]) -> list[list[Any]]:
    return [[encode(k), encode(v)] for k, v in value.items()]


def _sequence(value: Any) -> list[Any]:
    out = []
    for index, element in enumerate(value):
        try:
            out.append(encode(element))
        except Unencodable as exc:
            exc.path.append(f"[{index}]")
            raise
    return out


_ENCODERS: dict[type, Callable[[Any], dict[str, Any]]] = {
    tuple: lambda v: {"$tuple": _sequence(v)},
    set: lambda v: {"$set": _sequence(v)},
    frozenset: lambda v: {"$frozenset": _sequence(v)},
    bytes: lambda v: {"$bytes": base64.b64encode(v).decode("ascii")},
    dt.datetime: lambda v: {"$datetime": v.isoformat()},
    dt.date: lambda v: {"$date": v.isoformat()},
    dt.time: lambda v: {"$time": v.isoformat()},
    dt.timedelta: lambda v: {"$timedelta": [v.days, v.seconds, v.microseconds]},
    decimal.Decimal: lambda v: {"$decimal": str(v)},
    OrderedDict: lambda v: {"$odict": _items(v)},
}


def encode(value: Any) -> Any:
    """``value`` in a form ``json.dumps`` writes and :func:`decode` reads back;
    ``value`` itself (no copy) when it is plain JSON already. Raises
    Unencodable for anything else."""
    kind = type(value)
    if kind in _PLAIN:
        return value
    if kind is dict:
        return _encode_dict(value)
    if kind is list:
        out = _sequence(value)
        return value if all(a is b for a, b in zip(out, value, strict=True)) else out
    encoder = _ENCODERS.get(kind)
    if encoder is not None:
        return encoder(value)
    if isinstance(value, str):  # a str subclass: written, and read back, as str
        return value
    raise Unencodable(value)


def _encode_dict(value: dict[Any, Any]) -> Any:
    changed: dict[str, Any] | None = None
    for key, element in value.items():
        if type(key) is not str or (len(value) == 1 and key in _DECODERS):
            return {"$dict": _items(value)}
        try:
            out = encode(element)
        except Unencodable as exc:
            exc.path.append(f"[{key!r}]")
            raise
        if out is not element:
            if changed is None:
                changed = dict(value)
            changed[key] = out
    return value if changed is None else changed


def encode_fields(record: dict[str, Any], where: str) -> None:
    """A request record's ``meta`` and ``cb_kwargs`` in their stored form, in
    place; SerializationError naming where a value with no form sits."""
    for name in ("meta", "cb_kwargs"):
        if name in record:
            try:
                record[name] = encode(record[name])
            except Unencodable as exc:
                raise SerializationError(exc.at(f"{where}request.{name}")) from None


# --- reading back ---------------------------------------------------------------


def _as_list(raw: Any) -> list[Any]:
    if not isinstance(raw, list):
        raise ValueError("not a list")
    return [decode(element) for element in raw]


def _pairs(raw: Any) -> list[tuple[Any, Any]]:
    pairs = []
    for pair in _as_list(raw):
        if not isinstance(pair, list) or len(pair) != 2:
            raise ValueError("not a list of [key, value] pairs")
        hash(pair[0])  # a key must be hashable: TypeError otherwise
        pairs.append((pair[0], pair[1]))
    return pairs


def _text(parse: Callable[[str], Any]) -> Callable[[Any], Any]:
    def read(raw: Any) -> Any:
        if not isinstance(raw, str) or len(raw) > 64:
            raise ValueError("not a short string")
        return parse(raw)

    return read


def _timedelta(raw: Any) -> dt.timedelta:
    if not (isinstance(raw, list) and len(raw) == 3 and all(type(x) is int for x in raw)):
        raise ValueError("not [days, seconds, microseconds]")
    return dt.timedelta(days=raw[0], seconds=raw[1], microseconds=raw[2])


def _bytes(raw: Any) -> bytes:
    if not isinstance(raw, str):
        raise ValueError("not base64 text")
    return base64.b64decode(raw, validate=True)


_DECODERS: dict[str, Callable[[Any], Any]] = {
    "$tuple": lambda raw: tuple(_as_list(raw)),
    "$set": lambda raw: set(_as_list(raw)),
    "$frozenset": lambda raw: frozenset(_as_list(raw)),
    "$bytes": _bytes,
    "$datetime": _text(dt.datetime.fromisoformat),
    "$date": _text(dt.date.fromisoformat),
    "$time": _text(dt.time.fromisoformat),
    "$timedelta": _timedelta,
    "$decimal": _text(decimal.Decimal),
    "$odict": lambda raw: OrderedDict(_pairs(raw)),
    "$dict": lambda raw: dict(_pairs(raw)),
}


def decode(value: Any) -> Any:
    """The value :func:`encode` wrote. Raises ValueError, TypeError or
    ArithmeticError for a tagged object that is not well formed."""
    kind = type(value)
    if kind is dict:
        if len(value) == 1:
            ((key, raw),) = value.items()
            reader = _DECODERS.get(key)
            if reader is not None:
                return reader(raw)
        return {key: decode(element) for key, element in value.items()}
    if kind is list:
        return [decode(element) for element in value]
    return value


def may_hold_tagged(data: bytes | str) -> bool:
    """False when JSON ``data`` has no tagged value: nothing to decode."""
    if isinstance(data, bytes):
        return b'{"$' in data
    return '{"$' in data


def decode_field(value: Any, where: str) -> Any:
    try:
        return decode(value)
    except (ValueError, TypeError, ArithmeticError, binascii.Error, RecursionError) as exc:
        raise SerializationError(f"{where} holds a value that cannot be read: {exc}") from None
