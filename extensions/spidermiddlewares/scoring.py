"""Scores the requests a callback yields (``extensions/scoring.py``): each one's
priority moves by its score, so the frontier fetches the best first.

A scorer that raises, or gives something that is not a finite number, leaves
that request at the priority it had: logged once, counted
(``scoring/errors``, ``scoring/not_numbers``); the crawl goes on.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from scrapy import Request
from scrapy.utils.misc import build_from_crawler, load_object

from extensions.installed import require_addon, switched_off
from extensions.scoring import AnchorKeywordScorer, as_score, scored_priority
from extensions.settingchecks import component, number

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.settings import BaseSettings

logger = logging.getLogger(__name__)


def _scorer_problem(settings: BaseSettings, name: str) -> str | None:
    problem = component("score")(settings, name)
    if problem or not settings.get(name) or settings.getlist("SCORER_KEYWORDS"):
        return problem
    if load_object(settings.get(name)) is AnchorKeywordScorer:
        return 'is AnchorKeywordScorer, which needs SCORER_KEYWORDS, e.g. ["tutorial", "howto"]'
    return None


def _keywords_problem(settings: BaseSettings, name: str) -> str | None:
    if not all(isinstance(word, str) for word in settings.getlist(name, [])):
        return 'must be a list of words, e.g. ["tutorial", "howto"]'
    return None


SETTING_CHECKS = {
    "FRONTIER_SCORER": _scorer_problem,
    "FRONTIER_SCORE_SCALE": number(float, 0),
    "SCORER_KEYWORDS": _keywords_problem,
}


class ScoringMiddleware:
    def __init__(self, crawler: Crawler, score: Callable[[Request, Any], Any], scale: float):
        self.stats = crawler.stats
        self.score = score
        self.scale = scale
        self._said: set[str] = set()  # the kinds of failure logged already

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ScoringMiddleware:
        require_addon(crawler.settings, cls.__name__)
        scale = crawler.settings.getfloat("FRONTIER_SCORE_SCALE")
        path = crawler.settings.get("FRONTIER_SCORER")
        if path:
            scorer = build_from_crawler(load_object(path), crawler)
            return cls(crawler, scorer.score, scale)
        if callable(getattr(crawler.spidercls, "score_request", None)):

            def spider_score(request: Request, response: Any) -> Any:
                # the spider exists once the engine runs, before any callback
                spider: Any = crawler.spider
                return spider.score_request(request, response)

            return cls(crawler, spider_score, scale)
        raise switched_off(cls, "no FRONTIER_SCORER and no score_request method")

    def _scored(self, request: Request, response: Response) -> Request:
        try:
            value = self.score(request, response)
        except Exception:  # a scorer's own bug: this request keeps its priority
            self.stats.inc_value("scoring/errors")
            self._say("scoring/errors", request, "raised")
            return request
        score = as_score(value)
        if score is None:
            self.stats.inc_value("scoring/not_numbers")
            self._say("scoring/not_numbers", request, f"gave {value!r:.60}, not a number")
            return request
        self.stats.inc_value("scoring/scored")
        request.priority = scored_priority(request.priority, score, self.scale)
        return request

    def _say(self, stat: str, request: Request, what: str) -> None:
        """Log the first failure of each kind; the rest are counted alone."""
        if stat not in self._said:
            self._said.add(stat)
            logger.warning(
                "the scorer %s on %s: the request keeps its priority (further ones are "
                "counted in %s)", what, request.url[:200], stat,
                exc_info=stat == "scoring/errors",
            )  # fmt: skip

    def process_spider_output(
        self, response: Response, result: Iterable[Any], spider: Any = None
    ) -> Iterator[Any]:
        for output in result:
            yield self._scored(output, response) if isinstance(output, Request) else output

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any], spider: Any = None
    ) -> AsyncIterator[Any]:
        async for output in result:
            yield self._scored(output, response) if isinstance(output, Request) else output
