"""Crawler traps: links that would lead a crawl on forever, recognised by their shape.

* ``repeating_path``: a path segment that comes back again and again
  (``/a/b/a/b/a/b``, relative links resolved against their own page): one
  segment ``TRAP_REPEATED_SEGMENTS`` times or more (Nutch's default URL filter
  has the same rule). Short numbers (``/2024/01/01``) do not count.
* ``url_length``: a URL longer than Scrapy's ``URLLENGTH_LIMIT``.
* ``query_variants``: more than ``TRAP_QUERY_VARIANTS`` distinct query strings
  on one path of one host (session ids, endless sort and filter combinations),
  counted by each node for the paths it saw last.
* ``chain``: a chain of pages that differ only in their numbers, each found
  from the one before (a calendar linking to the next day, a "next" link that
  never ends), longer than ``TRAP_CHAIN_LIMIT``. The chain's length rides in
  ``request.meta`` like Scrapy's ``depth``, so it holds across the cluster.

Normal sites pass: a catalogue's thousands of ``/product/<id>`` pages are
found from its category pages, and a pagination whose pages all link to each
other makes no chain at all.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from extensions import defaults

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

#: request.meta key: how many pages before this one differed only in numbers
CHAIN = "trap_chain"
_NUMBERS = re.compile(r"\d+")
PATHS_REMEMBERED = 10_000  # (host, path) pairs whose query strings a node counts


def shape(url: str) -> str:
    """The URL with every number replaced: what a chain of pages has in common."""
    return _NUMBERS.sub("0", url)


def repeats(path: str, limit: int) -> bool:
    counts: dict[str, int] = {}
    for segment in path.split("/"):
        if not segment or (segment.isdigit() and len(segment) <= 4):
            continue
        counts[segment] = counts.get(segment, 0) + 1
        if counts[segment] >= limit:
            return True
    return False


@dataclass(frozen=True)
class TrapRules:
    chain_limit: int = defaults.TRAP_CHAIN_LIMIT
    repeated_segments: int = defaults.TRAP_REPEATED_SEGMENTS
    query_variants: int = defaults.TRAP_QUERY_VARIANTS
    url_length: int = 2083  # Scrapy's URLLENGTH_LIMIT default

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> TrapRules:
        return cls(
            chain_limit=settings.getint("TRAP_CHAIN_LIMIT"),
            repeated_segments=settings.getint("TRAP_REPEATED_SEGMENTS"),
            query_variants=settings.getint("TRAP_QUERY_VARIANTS"),
            url_length=settings.getint("URLLENGTH_LIMIT", 2083),
        )


class TrapDetector:
    """Says why a link found on a page is a trap, or None. One per node."""

    def __init__(self, rules: TrapRules):
        self.rules = rules
        # (host, path) -> the distinct query strings seen, up to the limit + 1
        self._queries: OrderedDict[tuple[str, str], set[int]] = OrderedDict()

    def chain_of(
        self, url: str, parent_url: str, parent_chain: int, parent_shape: str | None = None
    ) -> int:
        """``parent_shape``: ``shape(parent_url)``, given once for all of a page's links."""
        if url == parent_url:
            return 0
        if shape(url) == (parent_shape if parent_shape is not None else shape(parent_url)):
            return parent_chain + 1
        return 0

    def reason(self, url: str, chain: int) -> str | None:
        rules = self.rules
        if rules.url_length > 0 and len(url) > rules.url_length:
            return "url_length"
        try:
            parts = urlsplit(url)
        except ValueError:
            return None  # the URL policy refuses it with its own reason
        if rules.repeated_segments > 0 and repeats(parts.path, rules.repeated_segments):
            return "repeating_path"
        if rules.chain_limit > 0 and chain > rules.chain_limit:
            return "chain"
        if rules.query_variants > 0 and parts.query and self._new_variant_over(parts):
            return "query_variants"
        return None

    def _new_variant_over(self, parts) -> bool:
        key = ((parts.hostname or "").lower(), parts.path)
        seen = self._queries.get(key)
        if seen is None:
            seen = self._queries[key] = set()
            if len(self._queries) > PATHS_REMEMBERED:
                self._queries.popitem(last=False)
        else:
            self._queries.move_to_end(key)
        if len(seen) > self.rules.query_variants:
            return True
        seen.add(hash(parts.query))
        return len(seen) > self.rules.query_variants
