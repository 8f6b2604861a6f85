"""A crawl's scope as data: the JSON document ``scrapy seed --scope FILE`` takes,
``scrapy scope`` shows and changes, and every node enforces (``rules.py``).

Every field is optional::

    {"scope": "prefix", "include": ["/docs/"], "exclude": ["\\\\?sort="],
     "max_depth": 5, "extra_hops": 1, "sitemaps": "include",
     "max_pages": 10000, "max_bytes": 500000000, "max_seconds": 3600,
     "max_pages_per_host": 2000}

A document that does not hold is refused whole, with one line naming the field
(``ScopeError``): nothing of it is stored.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field, fields
from typing import Any

#: what ``scope`` may say: the seed alone, URLs under the seed's path, the
#: seed's host, its registered domain (subdomains included), anything
KINDS = ("page", "prefix", "host", "domain", "any")
SITEMAPS = ("include", "only", "skip")
#: the limits, each a positive number (``max_seconds`` may be a fraction)
LIMITS = ("max_pages", "max_bytes", "max_seconds", "max_pages_per_host")
#: a regex longer than this is refused: the check runs on every URL
MAX_PATTERN_LENGTH = 2000
MAX_PATTERNS = 1000


class ScopeError(ValueError):
    """A scope document, or a change to one, that cannot be taken; says which field."""


@dataclass(frozen=True)
class Scope:
    scope: str | None = None
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    max_depth: int | None = None
    extra_hops: int = 0
    sitemaps: str | None = None
    max_pages: int | None = None
    max_bytes: int | None = None
    max_seconds: float | None = None
    max_pages_per_host: int | None = None
    #: the compiled patterns, built once per document
    _include: re.Pattern | None = field(default=None, compare=False, repr=False)
    _exclude: re.Pattern | None = field(default=None, compare=False, repr=False)

    @property
    def limits(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in LIMITS if getattr(self, name) is not None}

    @property
    def limits_pages(self) -> bool:
        return self.max_pages is not None or self.max_pages_per_host is not None

    def included(self, url: str) -> bool:
        return self._include is not None and self._include.search(url) is not None

    def excluded(self, url: str) -> bool:
        return self._exclude is not None and self._exclude.search(url) is not None

    def as_dict(self) -> dict[str, Any]:
        """The document as given (fields left out stay out)."""
        data: dict[str, Any] = {}
        for spec in fields(self):
            if spec.name.startswith("_"):
                continue
            value = getattr(self, spec.name)
            if value is None or value == () or (spec.name == "extra_hops" and not value):
                continue
            data[spec.name] = list(value) if isinstance(value, tuple) else value
        return data

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), sort_keys=True, separators=(",", ":"))

    def with_patterns(self, include: list[str], exclude: list[str]) -> Scope:
        """This scope with more include and exclude patterns (each checked)."""
        data = self.as_dict()
        data["include"] = [*self.include, *(p for p in include if p not in self.include)]
        data["exclude"] = [*self.exclude, *(p for p in exclude if p not in self.exclude)]
        return parse(data)

    def with_field(self, name: str, value: Any) -> Scope:
        """This scope with one field set (None: left out), checked as a whole."""
        data = self.as_dict()
        if value is None:
            data.pop(name, None)
        else:
            data[name] = value
        return parse(data)


EMPTY = Scope()
FIELDS = tuple(spec.name for spec in fields(Scope) if not spec.name.startswith("_"))


def parse(data: Any) -> Scope:
    """The document as a Scope, or ScopeError naming the field that is wrong."""
    if isinstance(data, (str, bytes)):
        try:
            data = json.loads(data)
        except (ValueError, RecursionError) as exc:
            raise ScopeError(f"scope: not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ScopeError("scope: must be a JSON object")
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise ScopeError(f"{unknown[0]}: unknown field (known: {', '.join(FIELDS)})")
    kind = data.get("scope")
    if kind is not None and kind not in KINDS:
        raise ScopeError(f"scope: {kind!r:.80} is not one of {', '.join(KINDS)}")
    sitemaps = data.get("sitemaps")
    if sitemaps is not None and sitemaps not in SITEMAPS:
        raise ScopeError(f"sitemaps: {sitemaps!r:.80} is not one of {', '.join(SITEMAPS)}")
    include = _patterns(data, "include")
    exclude = _patterns(data, "exclude")
    numbers: dict[str, Any] = {
        "max_depth": _whole(data, "max_depth", low=0),
        "extra_hops": _whole(data, "extra_hops", low=0) or 0,
        "max_seconds": _seconds(data),
    }
    for name in ("max_pages", "max_bytes", "max_pages_per_host"):
        numbers[name] = _whole(data, name, low=1)
    return Scope(
        scope=kind,
        include=include,
        exclude=exclude,
        sitemaps=sitemaps,
        _include=_compiled(include),
        _exclude=_compiled(exclude),
        **numbers,
    )


def parse_value(name: str, text: str) -> Any:
    """``--set NAME=TEXT``: a number or a name as typed (JSON for a list;
    ``null`` leaves the field out)."""
    if name not in FIELDS:
        raise ScopeError(f"{name}: unknown field (known: {', '.join(FIELDS)})")
    try:
        return json.loads(text)
    except ValueError:
        return text


def _patterns(data: dict[str, Any], name: str) -> tuple[str, ...]:
    value = data.get(name, [])
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        raise ScopeError(f"{name}: must be a list of regular expressions")
    if len(value) > MAX_PATTERNS:
        raise ScopeError(f"{name}: {len(value)} patterns, at most {MAX_PATTERNS}")
    for pattern in value:
        if not pattern or len(pattern) > MAX_PATTERN_LENGTH:
            raise ScopeError(f"{name}: a pattern must be 1 to {MAX_PATTERN_LENGTH} characters")
        try:
            re.compile(pattern)
        except (re.error, RecursionError, OverflowError) as exc:
            raise ScopeError(f"{name}: {pattern!r:.80} does not compile: {exc}") from None
    return tuple(dict.fromkeys(value))


def _compiled(patterns: tuple[str, ...]) -> re.Pattern | None:
    # one alternation: a URL is read once however many patterns there are
    if not patterns:
        return None
    return re.compile("|".join(f"(?:{p})" for p in patterns))


def _whole(data: dict[str, Any], name: str, *, low: int) -> int | None:
    value = data.get(name)
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ScopeError(f"{name}: {value!r:.80} is not a whole number")
    if value < low:
        raise ScopeError(f"{name}: {value} is below {low}")
    return value


def _seconds(data: dict[str, Any]) -> float | None:
    value = data.get("max_seconds")
    if value is None:
        return None
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        raise ScopeError(f"max_seconds: {value!r:.80} is not a number")
    if value <= 0:
        raise ScopeError(f"max_seconds: {value} must be above 0")
    return float(value)
