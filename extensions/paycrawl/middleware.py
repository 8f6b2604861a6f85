"""Pays for the pages a site prices, within bounds (off unless
``PAY_PER_CRAWL_MAX_PRICE`` is set).

A ``402`` whose ``crawler-price`` is at or under ``PAY_PER_CRAWL_MAX_PRICE``, in
its currency, is tried once more with ``crawler-exact-price`` (the price the
crawler agrees to), signed by Web Bot Auth with that header covered, once the
crawl's ledger has reserved the price within ``PAY_PER_CRAWL_BUDGET``. Its
answer's ``crawler-charged`` is what the ledger counts as spent. Everything else
stays as it was without payments: the retry middleware dead-letters a ``402``
as ``payment_required``, now with the reason it was not paid (no price, a price
that is not one, over the maximum, over what the budget has left). A paid try
that fails is dead-lettered too, and never tried again.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import redis
from scrapy.exceptions import IgnoreRequest, NotConfigured

from extensions import clock, connection
from extensions.cluster.checkpoint import node_id_for
from extensions.frontier.deadletter import DeadLetters
from extensions.installed import require_addon
from extensions.keys import SpiderKeys
from extensions.meta import CRAWL_ID, DEAD_LETTERED, FIRST_FAILURE, PAYMENT_REFUSED
from extensions.paycrawl.declared import PAID_TRY
from extensions.paycrawl.ledger import Ledger
from extensions.paycrawl.price import Price, parse_price

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)

EXACT_PRICE = "crawler-exact-price"


class PayPerCrawlMiddleware:
    def __init__(self, crawler: Crawler, most: Price, budget: Price):
        self.crawler = crawler
        self.stats = crawler.stats
        self.most = most
        self.budget = budget
        server = connection.client_for(crawler)
        keys = SpiderKeys.for_crawler(crawler)
        self.ledger = Ledger(server, keys)
        self.dead_letters = DeadLetters(server, keys.dlq, node_id_for(crawler))

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> PayPerCrawlMiddleware:
        require_addon(crawler.settings, cls.__name__)
        most = parse_price(crawler.settings.get("PAY_PER_CRAWL_MAX_PRICE") or "")
        budget = parse_price(crawler.settings.get("PAY_PER_CRAWL_BUDGET") or "")
        if most is None or budget is None:  # (config.py refused what is set and wrong)
            raise NotConfigured
        return cls(crawler, most, budget)

    def process_response(self, request: Request, response: Response, spider: Any = None) -> Any:
        paid = request.meta.get(PAID_TRY)
        if paid:
            return self._paid_answer(request, response, paid)
        if response.status != 402:
            return response
        refusal = self._refusal(request, response)
        if refusal:
            request.meta[PAYMENT_REFUSED] = refusal  # the retry middleware's dead letter says it
            return response
        price = parse_price(response.headers.get("crawler-price"))
        assert price is not None
        self.stats.inc_value("paycrawl/offered")
        retry = request.replace(dont_filter=True)
        retry.headers[EXACT_PRICE] = str(price)
        retry.meta[PAID_TRY] = price.micros
        return retry

    def _refusal(self, request: Request, response: Response) -> str:
        """Why this priced page is not paid for ('' when it is)."""
        raw = response.headers.get("crawler-price")
        if raw is None:
            self.stats.inc_value("paycrawl/unpriced")
            return "no crawler-price: nothing to pay"
        price = parse_price(raw)
        if price is None:
            self.stats.inc_value("paycrawl/bad_price")
            return f"crawler-price {raw.decode('latin-1')[:40]!r} is not a price (e.g. USD 0.01)"
        if price.currency != self.most.currency or price.micros > self.most.micros:
            self.stats.inc_value("paycrawl/over_max_price")
            return f"asks {price}, over PAY_PER_CRAWL_MAX_PRICE ({self.most})"
        try:
            fits, left = self.ledger.reserve(
                self._crawl(request), price.micros, self.budget.micros, self.budget.currency
            )
        except redis.RedisError as exc:
            connection.health_for(self.crawler).failed(exc)
            return "the crawl's ledger could not be read (Redis): not paid blind"
        if not fits:
            self.stats.inc_value("paycrawl/over_budget")
            left_over = Price(self.budget.currency, max(left, 0))
            return (f"asks {price}, more than the crawl's PAY_PER_CRAWL_BUDGET "
                    f"({self.budget}) has left ({left_over})")  # fmt: skip
        return ""

    def _paid_answer(self, request: Request, response: Response, paid: int) -> Any:
        crawl = self._crawl(request)
        if 200 <= response.status < 300:
            raw = response.headers.get("crawler-charged")
            charged = parse_price(raw)
            if raw is not None and charged is None:
                self.stats.inc_value("paycrawl/bad_charge")  # the price agreed is what it cost
            amount = charged.micros if charged is not None else (paid if raw is not None else 0)
            try:
                self.ledger.settle(crawl, paid, amount)
            except redis.RedisError as exc:
                connection.health_for(self.crawler).failed(exc)
                logger.error("could not count a payment of %s for %s: %s", amount, request.url, exc)
            if amount:
                self.stats.inc_value("paycrawl/paid_pages")
                self.stats.inc_value("paycrawl/spent_micros", amount)
            return response
        self._give_up(request, f"the paid try answered HTTP {response.status}", response.status)
        raise IgnoreRequest(f"dead-lettered: the paid try of {request.url} failed")

    def process_exception(self, request: Request, exception: Exception, spider: Any = None) -> None:
        if request.meta.get(PAID_TRY) and not isinstance(exception, IgnoreRequest):
            self._give_up(request, f"the paid try failed: {type(exception).__name__}: {exception}")
            raise IgnoreRequest(f"dead-lettered: the paid try of {request.url} failed")

    def _give_up(self, request: Request, error: str, status: int | None = None) -> None:
        """A paid try that did not get the page: its reservation goes, it is
        dead-lettered, and nothing tries it again (each try may cost)."""
        paid = request.meta[PAID_TRY]
        try:
            self.ledger.release(self._crawl(request), paid)
        except redis.RedisError as exc:
            connection.health_for(self.crawler).failed(exc)
        self.stats.inc_value("paycrawl/paid_try_failed")
        self.stats.inc_value("failed/payment_required")
        now = clock.now()
        unpaid = request.replace(meta={k: v for k, v in request.meta.items() if k != PAID_TRY})
        unpaid.headers.pop(EXACT_PRICE, None)  # a replay asks the price again
        try:
            first = request.meta.get(FIRST_FAILURE, now)
            self.dead_letters.add_request(self.crawler, unpaid, kind="payment_required",
                                          error=f"{error}: not tried again", status=status,
                                          first=first, last=now)  # fmt: skip
        except redis.RedisError as exc:
            connection.health_for(self.crawler).failed(exc)
        request.meta[DEAD_LETTERED] = True
        request.meta["dont_retry"] = True

    @staticmethod
    def _crawl(request: Request) -> str:
        crawl = request.meta.get(CRAWL_ID)
        return crawl if isinstance(crawl, str) else ""
