"""Reading pickle without running it: scrapy-redis's queue entries are pickled
request dicts, and a pickle may name any class to build. These loaders build
plain data and the few inert values of ``INERT_CLASSES`` (dates and times,
decimals, sets, ordered dicts, lxml's strings) and refuse every other class.
"""

from __future__ import annotations

import _compat_pickle
import datetime as dt
import decimal
import io
import pickle
from collections import OrderedDict
from typing import Any


class _Text(str):
    """lxml's smart string (a ``CrawlSpider`` link's text), loaded as the text it
    is: the element it came from is not kept."""

    def __setstate__(self, state: Any) -> None:
        pass


class _Bytes(bytes):
    """lxml's byte-string result, loaded as the bytes it is (as ``_Text``)."""

    def __setstate__(self, state: Any) -> None:
        pass


# The only classes a queue entry may name: values that hold data and run no code
# when built from it (their constructors only parse their arguments).
INERT_CLASSES: dict[tuple[str, str], type] = {
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
    ("collections", "OrderedDict"): OrderedDict,
    ("datetime", "datetime"): dt.datetime,
    ("datetime", "date"): dt.date,
    ("datetime", "time"): dt.time,
    ("datetime", "timedelta"): dt.timedelta,
    ("datetime", "timezone"): dt.timezone,
    ("decimal", "Decimal"): decimal.Decimal,
    ("lxml.etree", "_ElementUnicodeResult"): _Text,
    ("lxml.etree", "_ElementStringResult"): _Bytes,
}


class PlainDataUnpickler(pickle.Unpickler):
    """Loads plain data (dicts, lists, tuples, strings, bytes, numbers) and the
    inert values of INERT_CLASSES; refuses any other class, so a pickle cannot
    run code here."""

    def find_class(self, module: str, name: str) -> Any:
        # Python 2's module names (protocols 0 to 2), as pickle itself maps them
        module = _compat_pickle.IMPORT_MAPPING.get(module, module)
        cls = INERT_CLASSES.get((module, name))
        if cls is None:
            raise pickle.UnpicklingError(
                f"refused to load {module}.{name}: only plain data, dates and times, "
                "decimals, sets, ordered dicts and lxml strings are read"
            )
        return cls


def unpickle(raw: bytes) -> Any:
    return PlainDataUnpickler(io.BytesIO(raw)).load()


class _Refused:
    """Stands for a refused class while an entry is only read for its URL:
    built from any arguments, it runs nothing."""

    def __new__(cls, *args: Any, **kwargs: Any) -> _Refused:
        return object.__new__(cls)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __setstate__(self, state: Any) -> None:
        pass


class _PeekingUnpickler(PlainDataUnpickler):
    def find_class(self, module: str, name: str) -> Any:
        try:
            return super().find_class(module, name)
        except pickle.UnpicklingError:
            return _Refused


def url_of(raw: bytes) -> str:
    """The URL of a pickled request that cannot be converted, for its dead
    letter; "" when there is none to read."""
    try:
        obj = _PeekingUnpickler(io.BytesIO(raw)).load()
    except Exception:  # garbage: the dead letter keeps the raw entry anyway
        return ""
    url = obj.get("url") if isinstance(obj, dict) else None
    return url[:2000] if isinstance(url, str) else ""
