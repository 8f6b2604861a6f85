"""What a site says its content may be used for: ``Content-Signal`` lines
(``search=yes, ai-train=no``) and the IETF's ``Content-Usage``
(``train-ai=n``), in its robots.txt (for every crawler, or in the group of this
one's token) and in a response's headers.

Read as the IETF's AI-preferences drafts write them:

* In robots.txt, ``Content-Usage: /path/ train-ai=n`` applies to the URLs under
  that path, matched as ``Allow``/``Disallow`` are (``*`` and ``$``, the longest
  pattern wins); without a path, to the whole site. The crawler's own group's
  lines over those of ``*``, as robots.txt groups go. ``Content-Signal`` lines
  are for the whole site, as today.
* ``Content-Usage`` preferences are a structured-field dictionary (RFC 9651,
  parsed by ``http_sf``): ``train-ai=n;reason="x"`` is ``train-ai: n``, its
  parameters no preferences. A value is ``y`` or ``n``; a label outside the
  vocabulary (``VOCABULARY``) or a value that is neither is counted and left out,
  and so is a line that does not parse.
* Statements are combined so that a refusal wins: a URL's robots.txt rule and
  its page's headers each say ``y`` or ``n`` of a label; any ``n`` makes it ``n``.

What comes out for a URL is one dict of preference -> value, the keys and
values lower-cased, each bounded, at most ``PREFERENCES_KEPT``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

TOKEN = re.compile(r"[A-Za-z0-9_.-]+")
SIGNAL_FIELD = b"content-signal"
USAGE_FIELD = b"content-usage"
PREFERENCES_KEPT = 32
RULES_KEPT = 256  # Content-Usage lines of one robots.txt
TEXT_KEPT = 64  # characters of a preference's name or value
SCANNED = 512 * 1024  # bytes of a robots.txt read, as Protego does at most
#: the labels of the IETF vocabulary (draft-ietf-aipref-vocab), each with the
#: broader one it narrows: a preference for a label holds for the narrower ones
#: that say nothing themselves
VOCABULARY: dict[str, str | None] = {
    "bots": None,
    "train-ai": "bots",
    "train-genai": "train-ai",
    "ai-use": "bots",
    "search": "bots",
}
REFUSALS = ("n", "no")


@dataclass
class Problems:
    """What a parse left out, for the caller's stats."""

    unparsed: int = 0
    unknown: int = 0


def agent_token(agent: str) -> str:
    """The crawler's token in robots.txt and robots meta tags: the product
    token of its user agent string, lower case ('' for none)."""
    match = TOKEN.search(agent or "")
    return match.group(0).lower() if match else ""


def crawler_token(settings: Any) -> str:
    """This crawler's token: ``ROBOTSTXT_USER_AGENT``'s, else ``USER_AGENT``'s."""
    return agent_token(settings.get("ROBOTSTXT_USER_AGENT") or settings.get("USER_AGENT") or "")


def preferences(value: str) -> dict[str, str]:
    """``search=yes, ai-train=no`` (or ``;``-separated) -> {search: yes, ai-train: no}:
    ``Content-Signal``'s form."""
    found: dict[str, str] = {}
    for part in value.replace(";", ",").split(","):
        name, equals, setting = part.partition("=")
        name, setting = name.strip().lower()[:TEXT_KEPT], setting.strip().lower()[:TEXT_KEPT]
        if equals and name and setting and len(found) < PREFERENCES_KEPT:
            found[name] = setting
    return found


def usage_preferences(value: str, problems: Problems | None = None) -> dict[str, str]:
    """A ``Content-Usage`` value (an RFC 9651 dictionary) -> {label: y|n}; what
    does not parse, or is no label of the vocabulary, is counted and left out."""
    import http_sf
    from http_sf.types import Token

    problems = problems if problems is not None else Problems()
    try:
        parsed: Any = http_sf.parse(value.encode("latin-1", "replace")[:4096], tltype="dictionary")
    except Exception:  # http_sf raises ValueError, and others on odd input
        problems.unparsed += 1
        return {}
    found: dict[str, str] = {}
    for label, (item, _parameters) in parsed.items():
        setting = str(item).lower() if isinstance(item, Token | str) else None
        if label not in VOCABULARY or setting not in ("y", "n"):
            problems.unknown += 1
            continue
        found[label] = setting
    return found


def refusal_wins(*statements: dict[str, str]) -> dict[str, str]:
    """Statements combined: each label's value, a refusal over any consent."""
    combined: dict[str, str] = {}
    for statement in statements:
        for name, setting in statement.items():
            # a refusal is kept; a later statement's refusal takes a consent's place
            if name not in combined or (setting in REFUSALS and combined[name] not in REFUSALS):
                combined[name] = setting
    return dict(list(combined.items())[:PREFERENCES_KEPT])


def _pattern(path: str) -> re.Pattern[str]:
    regex = "".join(".*" if char == "*" else re.escape(char) for char in path.rstrip("$"))
    return re.compile(regex + ("$" if path.endswith("$") else ""))


@dataclass
class RobotsUsage:
    """What one robots.txt says: site-wide signals, and Content-Usage by path."""

    signals: dict[str, str] = field(default_factory=dict)
    #: (path pattern, its compiled form, the preferences), as the file has them
    rules: list[tuple[str, re.Pattern[str], dict[str, str]]] = field(default_factory=list)
    problems: Problems = field(default_factory=Problems)

    def __bool__(self) -> bool:
        return bool(self.signals or self.rules)

    def for_path(self, path: str) -> dict[str, str]:
        """The preferences for a URL's path (and query): the signals, and the
        longest matching Content-Usage rule's (rules of one length: combined)."""
        best, matched = -1, []
        for pattern, compiled, prefs in self.rules:
            if compiled.match(path):
                if len(pattern) > best:
                    best, matched = len(pattern), [prefs]
                elif len(pattern) == best:
                    matched.append(prefs)
        return {**self.signals, **refusal_wins(*matched)}


def robots_usage(body: bytes, token: str) -> RobotsUsage:
    """The usage preferences a robots.txt states for the crawler named ``token``."""
    everyone, ours = RobotsUsage(), RobotsUsage()
    problems = Problems()
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
            continue
        in_rules = bool(agents)
        groups = []
        if not agents or "*" in agents:
            groups.append(everyone)
        if token and token in agents:
            groups.append(ours)
        if name == SIGNAL_FIELD:
            found = preferences(text)
            for group in groups:
                group.signals.update(found)
        elif name == USAGE_FIELD:
            path, rest = "/", text
            if text[:1] in ("/", "*"):  # a path first, as Allow and Disallow have
                path, _, rest = text.replace("\t", " ").partition(" ")
            prefs = usage_preferences(rest.strip(), problems)
            rule = (path, _pattern(path), prefs)
            for group in groups:
                if prefs and len(group.rules) < RULES_KEPT:
                    group.rules.append(rule)
    # the crawler's own group over everyone's: its rules alone when it has some
    return RobotsUsage(
        signals={**everyone.signals, **ours.signals},
        rules=ours.rules or everyone.rules,
        problems=problems,
    )


def header_usage(values: Iterable[bytes], usage: bool = False,
                 problems: Problems | None = None) -> dict[str, str]:  # fmt: skip
    """The preferences ``Content-Signal`` (or, with ``usage``, ``Content-Usage``)
    headers state, combined so that a refusal wins."""
    found = []
    for raw in values:
        text = raw.decode("latin-1")
        found.append(usage_preferences(text, problems) if usage else preferences(text))
    return refusal_wins(*found)
