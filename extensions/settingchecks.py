"""Checks of a setting's value, for ``config.py`` and for the packages that
keep their own settings' checks: each takes the settings and the setting's
name, and returns what is wrong with its value, or None."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

Check = Callable[["BaseSettings", str], "str | None"]


def _default(name: str, missing: object) -> object:
    # at call time: the defaults load the capabilities' declarations, which use these checks
    from extensions import defaults

    return getattr(defaults, name, missing)


def number(kind: type, low: float | None = None, high: float | None = None, *,
            above: bool = False) -> Check:  # fmt: skip
    """A check that the setting is a ``kind`` (int or float) within bounds."""

    def check(settings: BaseSettings, name: str) -> str | None:
        raw = settings.get(name, _default(name, None))
        try:
            value = kind(raw)
        except (TypeError, ValueError):
            return f"must be {'a whole number' if kind is int else 'a number'}"
        if isinstance(value, float) and not math.isfinite(value):
            return "must be a finite number"
        if kind is int and isinstance(raw, float) and raw != value:
            return "must be a whole number"
        if low is not None and (value <= low if above else value < low):
            return f"must be {'more than' if above else 'at least'} {low:g}"
        if high is not None and value > high:
            return f"must be at most {high:g}"
        return None

    return check


def flag(settings: BaseSettings, name: str) -> str | None:
    try:
        settings.getbool(name, bool(_default(name, False)))
    except ValueError:
        return "must be True or False (or 1 / 0)"
    return None


def choice(*allowed: str | None) -> Check:
    def check(settings: BaseSettings, name: str) -> str | None:
        if settings.get(name, _default(name, None)) not in allowed:
            return "must be one of " + ", ".join(repr(a) for a in allowed)
        return None

    return check


def component(method: str) -> Check:
    """A check that the setting, when set, names a loadable class (or object)
    with ``method(request, response)``."""

    def check(settings: BaseSettings, name: str) -> str | None:
        from scrapy.utils.misc import load_object  # (Scrapy's, when a setting names one)

        path = settings.get(name) or ""
        if not path:
            return None
        try:
            loaded = load_object(path) if isinstance(path, str) else path
        except (ImportError, NameError, ValueError, AttributeError) as exc:
            return f"cannot be loaded: {exc}"
        if not callable(getattr(loaded, method, None)):
            return f"must have a {method}(request, response) method"
        return None

    return check


def number_map(
    settings: BaseSettings, name: str, what: str, what_values: str
) -> tuple[dict[str, float] | None, str | None]:
    """A dict setting of finite numbers >= 0, or the problem with it."""
    try:
        values = {key: float(value) for key, value in settings.getdict(name).items()}
    except (TypeError, ValueError):
        return None, f"must map {what}"
    if any(not math.isfinite(v) or v < 0 for v in values.values()):
        return None, f"{what_values} must be 0 or positive"
    return values, None


def names(settings: BaseSettings, name: str) -> str | None:
    names = settings.getlist(name, [])
    if not all(isinstance(n, str) and n for n in names):
        return 'must be a list of field names, e.g. ["fetched_at"]'
    return None


def regexes(settings: BaseSettings, name: str) -> str | None:
    patterns = settings.getlist(name, [])
    for pattern in patterns:
        if not isinstance(pattern, str):
            return f"must be a list of regular expressions, not {patterns!r:.80}"
        try:
            re.compile(pattern)
        except re.error as exc:
            return f"{pattern!r} is not a regular expression: {exc}"
    return None
