"""Answering a ban's challenge: a ``BAN_HANDLER`` component, or the spider's own
``handle_ban(request, response)`` method, returns the requests that answer it
(a form post, a cookie fetch); they are fetched at once, past the scheduler.

An answered challenge lifts the ban, not its reason: the pushback middleware
(``pushback.py``) holds and slows the host all the same.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy.utils.misc import build_from_crawler, load_object

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)

#: meta of a request a ban handler returned: its own answer is never a ban to solve
BAN_ANSWER = "_ban_answer"


class ChallengeAnswerer:
    def __init__(self, crawler: Crawler, handler: Any):
        self.crawler = crawler
        self.stats = crawler.stats
        self.handler = handler
        self._said: set[str] = set()  # hosts whose answered challenge was logged

    @classmethod
    def for_spider(cls, crawler: Crawler, spider: Any) -> ChallengeAnswerer | None:
        """The ``BAN_HANDLER`` setting's component, else the spider when it has a
        ``handle_ban`` method, else None: bans are then waited out."""
        path = crawler.settings.get("BAN_HANDLER")
        if path:
            return cls(crawler, build_from_crawler(load_object(path), crawler))
        if callable(getattr(spider, "handle_ban", None)):
            return cls(crawler, spider)
        return None

    async def answer(self, request: Request, response: Response, group: str) -> bool:
        """Whether the handler answered the challenge (returned requests, all of
        them fetched); its outcome counts in the stats."""
        self.stats.inc_value("bans/handler_called")
        try:
            answers = list(self.handler.handle_ban(request, response) or ())
        except Exception:  # a handler's own bug: logged once per call, the ban stands
            logger.exception("BAN_HANDLER failed on %s", request.url[:200])
            self.stats.inc_value("bans/handler_errors")
            return False
        if not answers:
            self.stats.inc_value("bans/unsolved")
            return False
        assert self.crawler.engine is not None
        for answer in answers:
            answer.meta[BAN_ANSWER] = True
            try:
                reply = await self.crawler.engine.download_async(answer)
            except Exception as exc:  # the answer could not be sent: the ban stands
                logger.warning("could not send the answer to a challenge: %s", exc)
                self.stats.inc_value("bans/unsolved")
                return False
            if reply.status >= 400:
                logger.warning(
                    "the answer to %s's challenge was refused (HTTP %d)", group, reply.status
                )
                self.stats.inc_value("bans/unsolved")
                return False
        self.stats.inc_value("bans/solved")
        logger.log(
            logging.DEBUG if group in self._said else logging.INFO,
            "answered the challenge of %s (said once per host)",
            group,
        )
        self._said.add(group)
        return True
