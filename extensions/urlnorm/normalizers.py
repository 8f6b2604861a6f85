"""The normalizers the project ships, each one rule a crawler of the open web
needs so that one page is one URL. A normalizer is any class with
``normalize(url: str) -> str`` that returns the URL it was given when it has
nothing to change (and never raises for a URL it cannot read: it returns it),
built with ``from_settings(settings)`` when it has one, else with no argument.
Query strings are handled as the raw text they are: a pair that stays keeps its
encoding byte for byte.
"""

from __future__ import annotations

import fnmatch
import re
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit, urlunsplit

from extensions import defaults

if TYPE_CHECKING:
    from collections.abc import Iterable

    from scrapy.settings import BaseSettings

DEFAULT_PORTS = {"http": 80, "https": 443}
NAMES_REMEMBERED = 4096  # parameter names whose verdict a ParameterSet keeps at hand


def query_name(pair: str) -> str:
    """A query pair's parameter name as a server reads it (``a%5Fb=1`` -> ``a_b``)."""
    name = pair.partition("=")[0]
    if "%" in name or "+" in name:
        name = unquote(name.replace("+", " "))
    return name.lower()


class ParameterSet:
    """Parameter names and globs (``utm_*``), matched without regard to case."""

    def __init__(self, patterns: Iterable[str], globs_allowed: bool = True):
        names, globs = set(), []
        for pattern in patterns:
            pattern = pattern.lower()
            if globs_allowed and any(c in pattern for c in "*?["):
                globs.append(pattern)
            else:
                names.add(pattern)
        self.names = frozenset(names)
        self.glob = re.compile("|".join(fnmatch.translate(g) for g in globs)) if globs else None
        self._known: dict[str, bool] = {}  # parameter names met, and whether they are in

    def __contains__(self, name: str) -> bool:
        known = self._known.get(name)
        if known is None:
            known = name in self.names or bool(self.glob and self.glob.match(name))
            if len(self._known) >= NAMES_REMEMBERED:
                self._known.clear()  # a site minting names without end
            self._known[name] = known
        return known

    def __bool__(self) -> bool:
        return bool(self.names or self.glob)


def drop_query_parameters(url: str, drop: ParameterSet) -> str:
    """``url`` without the query pairs whose names ``drop`` holds."""
    base, mark, rest = url.partition("?")
    if not mark:
        return url
    query, hash_mark, fragment = rest.partition("#")
    pairs = [pair for pair in query.split("&") if pair]
    kept = [pair for pair in pairs if query_name(pair) not in drop]
    if len(kept) == len(pairs) and "&&" not in query and not query.endswith("&"):
        return url
    return base + ("?" + "&".join(kept) if kept else "") + hash_mark + fragment


def _already_basic(url: str) -> bool:
    """Whether BasicNormalizer would leave ``url`` as it is, seen from its text
    alone (a lower-case http(s) URL with a path, no port, no fragment)."""
    if url.startswith("https://"):
        start = 8
    elif url.startswith("http://"):
        start = 7
    else:
        return False
    slash = url.find("/", start)
    if slash < 0 or "#" in url or url.endswith("?"):
        return False
    netloc = url[start:slash]
    return bool(netloc) and ":" not in netloc and "?" not in netloc and netloc == netloc.lower()


class BasicNormalizer:
    """Scheme and host lower-cased, a default port (``:80``, ``:443``) and the
    fragment dropped, an empty path made ``/``, an empty query (``?``) dropped."""

    def normalize(self, url: str) -> str:
        if _already_basic(url):
            return url  # most URLs: no need to take them apart
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError:
            return url  # not a URL one can read: the URL policy says why
        netloc = parts.netloc
        host = parts.hostname or ""
        if netloc and (netloc != netloc.lower() or port is not None):
            userinfo, at, _ = netloc.rpartition("@")
            shown = f"[{host}]" if ":" in host else host
            if port is not None and DEFAULT_PORTS.get(parts.scheme.lower()) != port:
                shown += f":{port}"
            netloc = userinfo + at + shown
        path = parts.path or ("/" if netloc else "")
        return urlunsplit((parts.scheme.lower(), netloc, path, parts.query, "")).removesuffix("?")


class TrackingParametersNormalizer:
    """Query parameters that say where a visitor came from, never what the page
    is: ``URL_TRACKING_PARAMETERS`` (``utm_*``, ``gclid``, ``fbclid``...) and the
    project's ``URL_DROP_PARAMETERS``."""

    def __init__(self, parameters: Iterable[str] = defaults.URL_TRACKING_PARAMETERS):
        self.drop = ParameterSet(parameters)

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> TrackingParametersNormalizer:
        return cls(
            [*settings.getlist("URL_TRACKING_PARAMETERS"), *settings.getlist("URL_DROP_PARAMETERS")]
        )

    def normalize(self, url: str) -> str:
        return drop_query_parameters(url, self.drop) if self.drop else url


# ;jsessionid=0123ABC in a path segment (Java servlets, and PHP's and ASP's likes)
PATH_SESSION = re.compile(r";(?:jsessionid|phpsessid|sid|sessionid)=[^;/?#]*", re.IGNORECASE)


class SessionIdNormalizer:
    """Session ids, which give every visitor (and every node) its own copy of
    every URL: ``;jsessionid=...`` path parameters and the query parameters
    ``URL_SESSION_PARAMETERS`` names (``PHPSESSID``, ``sid``...)."""

    def __init__(self, parameters: Iterable[str] = defaults.URL_SESSION_PARAMETERS):
        self.drop = ParameterSet(parameters)

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> SessionIdNormalizer:
        return cls(settings.getlist("URL_SESSION_PARAMETERS"))

    def normalize(self, url: str) -> str:
        if ";" in url:
            base, mark, rest = url.partition("?")
            url = PATH_SESSION.sub("", base) + mark + rest
        return drop_query_parameters(url, self.drop) if self.drop else url


class SortedQueryNormalizer:
    """Query pairs in one order (by name, a name's values in the order they
    came): ``?b=2&a=1`` and ``?a=1&b=2`` are one URL, as Scrapy's fingerprint
    already takes them."""

    def normalize(self, url: str) -> str:
        base, mark, rest = url.partition("?")
        if not mark or "&" not in rest:
            return url
        query, hash_mark, fragment = rest.partition("#")
        pairs = query.split("&")
        ordered = sorted(pairs, key=lambda pair: pair.partition("=")[0])
        if ordered == pairs:
            return url
        return base + "?" + "&".join(ordered) + hash_mark + fragment


class HostRule:
    """One host's rules from ``URL_HOST_RULES``: parameters to drop, then
    rewrites (a regular expression and its replacement, ``re.sub``), in order."""

    def __init__(self, drop: Iterable[str], rewrite: Iterable[tuple[str, str]]):
        self.drop = ParameterSet(drop)
        self.rewrite = [(re.compile(pattern), replacement) for pattern, replacement in rewrite]

    def apply(self, url: str) -> str:
        if self.drop:
            url = drop_query_parameters(url, self.drop)
        for pattern, replacement in self.rewrite:
            url = pattern.sub(replacement, url)
        return url


def host_rules_problem(rules: object) -> str | None:
    """What is wrong with a URL_HOST_RULES value, or None."""
    if not isinstance(rules, dict):
        return 'must be a dict of host to rules, e.g. {"example.com": {"drop": ["ref"]}}'
    for host, rule in rules.items():
        if not isinstance(host, str) or not host or host != host.strip().lower():
            return f"{host!r}: a host must be a lower-case name"
        if not isinstance(rule, dict) or not set(rule) <= {"drop", "rewrite"}:
            return f"{host!r}: its rules must be a dict with 'drop' and/or 'rewrite'"
        drop = rule.get("drop", [])
        if not isinstance(drop, list) or not all(isinstance(p, str) and p for p in drop):
            return f"{host!r}: 'drop' must be a list of parameter names or globs"
        rewrite = rule.get("rewrite", [])
        if not isinstance(rewrite, list):
            return f"{host!r}: 'rewrite' must be a list of [pattern, replacement] pairs"
        for pair in rewrite:
            if not (isinstance(pair, (list, tuple)) and len(pair) == 2
                    and all(isinstance(p, str) for p in pair)):  # fmt: skip
                return f"{host!r}: each rewrite must be a [pattern, replacement] pair, not {pair!r}"
            try:
                re.compile(pair[0]).sub(pair[1], "")
            except (re.error, IndexError) as exc:
                return f"{host!r}: the rewrite {pair[0]!r} -> {pair[1]!r} does not compile: {exc}"
    return None


class HostRulesNormalizer:
    """The project's own rules per host (``URL_HOST_RULES``), which apply to the
    host and every name under it (``example.com`` also covers ``www.example.com``)."""

    def __init__(self, rules: dict[str, dict]):
        problem = host_rules_problem(rules)
        if problem:
            raise ValueError(f"URL_HOST_RULES {problem}")
        self.rules = {
            host: HostRule(rule.get("drop", []), [tuple(p) for p in rule.get("rewrite", [])])
            for host, rule in rules.items()
        }

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> HostRulesNormalizer:
        return cls(settings.getdict("URL_HOST_RULES"))

    def rule_for(self, host: str) -> HostRule | None:
        while host:
            rule = self.rules.get(host)
            if rule is not None:
                return rule
            host = host.partition(".")[2]
        return None

    def normalize(self, url: str) -> str:
        if not self.rules:
            return url
        try:
            host = urlsplit(url).hostname or ""
        except ValueError:
            return url
        rule = self.rule_for(host)
        return rule.apply(url) if rule is not None else url
