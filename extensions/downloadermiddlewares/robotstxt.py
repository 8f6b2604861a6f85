"""robots.txt that holds whatever the cluster does: Scrapy's middleware, mended.

Two gaps of Scrapy 2.19's ``RobotsTxtMiddleware`` let disallowed pages through:

* While a host's robots.txt is being fetched, every request for that host waits
  on one shared Deferred. Under the asyncio reactor each waiter turns it into a
  Future, which takes the Deferred's result and leaves ``None`` for the next
  waiter, and ``None`` means "no robots.txt: everything allowed". A node that
  starts (or takes over a dead node's leases) with many requests of a host
  queued sent all but the first of them unchecked. Here every waiter reads the
  parser the middleware stored, not the Deferred's result.
* A robots.txt answered 5xx or 429 was parsed as if its error page were the
  rules, and one that could not be fetched at all (timeout, refused
  connection) counted as no robots.txt: everything allowed. RFC 9309 says both
  mean "disallow everything" for now. Here the host's requests wait in Redis
  (``ROBOTSTXT_RETRY_DELAY`` seconds) and robots.txt is asked again after that,
  so nothing is fetched unchecked; a request that has waited
  ``ROBOTSTXT_RETRY_TIMES`` times is dropped (``robotstxt/gave_up``).

And a host's robots.txt is fetched once for the cluster (``ROBOTSTXT_SHARED``,
``extensions/robotscache.py``): the other nodes parse the body the first kept.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware as ScrapyRobotsTxt
from scrapy.exceptions import IgnoreRequest
from scrapy.utils.httpobj import urlparse_cached
from scrapy.utils.misc import build_from_crawler
from twisted.internet.defer import Deferred

from extensions import clock, connection, defaults
from extensions.downloadermiddlewares.sendslots import remember_crawl_delay
from extensions.frontier.groups import group_for
from extensions.keys import SpiderKeys
from extensions.meta import CRAWL_ID, DELAY_UNTIL, ROBOTS_WAITS, SEND_SLOT
from extensions.robotscache import SharedRobots, robots_state
from extensions.usage import crawler_token, robots_usage

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.robotstxt import RobotParser

logger = logging.getLogger(__name__)


USAGE_HOSTS_KEPT = 100_000  # hosts whose robots.txt usage preferences a node keeps


class RobotsUnavailable(IgnoreRequest):
    """robots.txt answered a server error: its host is off limits for now."""


class RobotsTxtMiddleware(ScrapyRobotsTxt):
    def __init__(self, crawler: Crawler):
        super().__init__(crawler)
        self.retry_delay = crawler.settings.getfloat(
            "ROBOTSTXT_RETRY_DELAY", defaults.ROBOTSTXT_RETRY_DELAY
        )
        self.retry_times = crawler.settings.getint(
            "ROBOTSTXT_RETRY_TIMES", defaults.ROBOTSTXT_RETRY_TIMES
        )
        self._unavailable: dict[str, float] = {}  # netloc -> when to ask again
        #: ROBOTSTXT_SHARED: robots.txt once for the cluster (robotscache.py)
        self.shared: SharedRobots | None = None
        self.robots_slots = robots_state(crawler).slots
        self._robots_crawls: dict[str, str] = {}  # netloc -> the crawl whose page asked
        self.queue_by = crawler.settings.get("FRONTIER_QUEUE_BY")
        self.usage_token = crawler_token(crawler.settings)
        if crawler.settings.getbool("ROBOTSTXT_SHARED"):
            keys = SpiderKeys.for_crawler(crawler)
            self.shared = SharedRobots(connection.client_for(crawler), keys, crawler.stats,
                                       crawler.settings)  # fmt: skip

    async def process_request(self, request: Request, spider: Spider | None = None):
        if request.meta.get("dont_obey_robotstxt"):
            # a robots.txt this middleware asked for: booked (dead letters, figures)
            # under the crawl of the page that needed it
            crawl = self._robots_crawls.pop(urlparse_cached(request).netloc, None)
            if crawl and request.url.endswith("/robots.txt"):
                request.meta.setdefault(CRAWL_ID, crawl)
            return None
        if request.url.startswith(("data:", "file:")):
            return None
        netloc = urlparse_cached(request).netloc
        again = self._unavailable.get(netloc)
        if again is not None and clock.now() >= again:
            del self._unavailable[netloc]
            self._parsers.pop(netloc, None)  # the next request asks for robots.txt again
        try:
            parser = await self.robot_parser(request)
        except RobotsUnavailable:
            return self._wait(request, netloc)
        if netloc in self._unavailable:
            return self._wait(request, netloc)
        self.process_request_2(parser, request)
        return None

    async def robot_parser(self, request: Request) -> RobotParser | None:
        netloc = urlparse_cached(request).netloc
        crawl = request.meta.get(CRAWL_ID)
        if crawl and netloc not in self._parsers:
            self._robots_crawls[netloc] = crawl
        try:
            return await self._robot_parser(request, netloc)
        finally:
            self._robots_crawls.pop(netloc, None)

    async def _robot_parser(self, request: Request, netloc: str) -> RobotParser | None:
        if self.shared is not None and netloc not in self._parsers:
            # the others of this node wait on it while the cluster is asked
            asked: Deferred = Deferred()
            self._parsers[netloc] = asked
            try:
                await self._from_cluster(request, netloc)
            except Exception:
                self._parsers.pop(netloc, None)  # the next request of the host asks again
                raise
            finally:
                asked.callback(None)  # its waiters read what is stored, as below
        await super().robot_parser(request)
        # What the middleware stored, not what the shared Deferred handed this
        # waiter (None for all but the first under the asyncio reactor).
        parser = self._parsers.get(urlparse_cached(request).netloc)
        if isinstance(parser, Deferred):  # not settled: cannot happen once awaited
            raise RobotsUnavailable("robots.txt not read yet")
        return parser

    async def _from_cluster(self, request: Request, netloc: str) -> None:
        assert self.shared is not None
        body = await self.shared.body_or_claim(netloc)
        if body is not None:
            self._parsers[netloc] = build_from_crawler(self._parserimpl, self.crawler, body)
            self._usage_of(netloc, body)
            # as if fetched here: what was leased before its Crawl-delay was known waits
            group = group_for(request.url, request.meta.get("download_slot"), self.queue_by)
            remember_crawl_delay(robots_state(self.crawler).crawl_delayed, group, body)
            return
        del self._parsers[netloc]  # this node fetches it (Scrapy's way)
        slot = request.meta.get(SEND_SLOT)
        if slot:  # robots.txt goes at the page's send slot, the page asks anew
            self.robots_slots[netloc] = slot
            request.meta[SEND_SLOT] = [0.0, 0.0]
        try:
            await super().robot_parser(request)
        finally:
            self.robots_slots.pop(netloc, None)

    async def _parse_robots(self, response: Response, netloc: str, request: Request) -> None:
        if response.status >= 500 or response.status == 429:
            self._stats.inc_value(f"robotstxt/response_status_count/{response.status}")
            self._unavailable_now(netloc, f"answered {response.status}")
            return
        if self.shared is not None:
            self.shared.keep(netloc, response.body)
        if 200 <= response.status < 300:
            self._usage_of(netloc, response.body)
        await super()._parse_robots(response, netloc, request)

    def _usage_of(self, netloc: str, body: bytes) -> None:
        """Keep what the host's robots.txt says its content may be used for."""
        usage = robots_state(self.crawler).usage
        found = robots_usage(body, self.usage_token)
        for name, count in (("unparsed", found.problems.unparsed),
                            ("unknown_labels", found.problems.unknown)):  # fmt: skip
            if count:
                self._stats.inc_value(f"usage/{name}", count)
        if found:
            usage[netloc] = found
            usage.move_to_end(netloc)
            if len(usage) > USAGE_HOSTS_KEPT:
                usage.popitem(last=False)
        else:
            usage.pop(netloc, None)

    def _robots_error(self, exc: Exception, netloc: str) -> None:
        if isinstance(exc, IgnoreRequest):  # refused on purpose (URL policy): Scrapy's way
            super()._robots_error(exc, netloc)
            return
        self._stats.inc_value(f"robotstxt/exception_count/{type(exc)}")
        self._unavailable_now(netloc, f"could not be fetched ({type(exc).__name__})")

    def _unavailable_now(self, netloc: str, why: str) -> None:
        self._stats.inc_value("robotstxt/unavailable")
        if self.shared is not None:
            self.shared.let_go(netloc)
        logger.warning(
            "robots.txt of %s %s: its requests wait %ss, then it is asked again",
            netloc,
            why,
            self.retry_delay,
        )
        self._unavailable[netloc] = clock.now() + self.retry_delay
        waiting = self._parsers[netloc]
        self._parsers[netloc] = None
        if isinstance(waiting, Deferred):
            waiting.callback(None)

    def _wait(self, request: Request, netloc: str) -> Request:
        waits = request.meta.get(ROBOTS_WAITS, 0) + 1
        if waits > self.retry_times:
            self._stats.inc_value("robotstxt/gave_up")
            logger.warning(
                "dropping %s: robots.txt of %s stayed unavailable through %d waits",
                request.url[:200],
                netloc,
                self.retry_times,
            )
            raise IgnoreRequest("robots.txt unavailable")
        self._stats.inc_value("robotstxt/waited")
        parked = request.replace(dont_filter=True)
        parked.meta[ROBOTS_WAITS] = waits
        parked.meta[DELAY_UNTIL] = self._unavailable.get(netloc, clock.now() + self.retry_delay)
        return parked
