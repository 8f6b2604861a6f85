"""Best-first order: a score for each request a callback yields.

A ``FRONTIER_SCORER`` component (a class with ``score(request, response)``,
built with ``from_crawler`` when it has one), else the spider's own
``score_request(request, response)`` method, gives each request a callback
yields a number: higher is fetched sooner. The score moves the request's
priority, ``priority + round(score * FRONTIER_SCORE_SCALE)``: the field Scrapy
orders by, which the frontier keeps with the request wherever it goes (another
node's lease, a dead node's requests taken back, a MongoDB spill, a recrawl),
so nothing else has to carry it. Within a host, its queue is in that order;
across hosts, the frontier leases the best heads first, as for any priority.

Two scorers ship for the common cases; a project writes its own in a few lines.
"""

from __future__ import annotations

import math
import numbers
from typing import TYPE_CHECKING, Any, Protocol

from extensions.meta import MAX_PRIORITY

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response


class Scorer(Protocol):
    def score(self, request: Request, response: Response) -> float: ...


def as_score(value: Any) -> float | None:
    """``value`` as a score, or None when it is not a finite number (a bool is not one)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def scored_priority(priority: int, score: float, scale: float) -> int:
    """The priority a request with ``score`` gets, within the range a queue takes."""
    moved = priority + round(score * scale)
    return max(-MAX_PRIORITY, min(MAX_PRIORITY, moved))


class DepthScorer:
    """Shallow pages first, across hosts too: the score is minus the request's
    depth (Scrapy's ``DepthMiddleware`` sets it before scoring)."""

    def score(self, request: Request, response: Response) -> float:
        return -float(request.meta.get("depth", 0))


class AnchorKeywordScorer:
    """Links whose anchor text names one of ``SCORER_KEYWORDS`` first: a point
    for each keyword in the link's text (``meta["link_text"]``, which
    CrawlSpider's rules set, and the ``site`` spider when a scorer is on), half
    a point for each in its URL; case does not matter."""

    def __init__(self, keywords: list[str]):
        self.keywords = [word.strip().lower() for word in keywords if word.strip()]

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> AnchorKeywordScorer:
        keywords = crawler.settings.getlist("SCORER_KEYWORDS")
        if not keywords:
            raise ValueError(
                'AnchorKeywordScorer needs SCORER_KEYWORDS, e.g. ["tutorial", "howto"]'
            )
        return cls(keywords)

    def score(self, request: Request, response: Response) -> float:
        text = str(request.meta.get("link_text") or "").lower()
        url = request.url.lower()
        return sum((word in text) + 0.5 * (word in url) for word in self.keywords)
