"""Pay-per-crawl, declared (``extensions/capability.py``): its settings, its
ledger's key, the middleware that pays and the part ``scrapy status`` reads.
How: ``price.py`` (prices as the protocol writes them), ``ledger.py`` and
``pay_ledger.lua`` (the budget, per crawl, in Redis), ``middleware.py``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from extensions.capability import Capability, Key, Setting
from extensions.paycrawl.price import parse_price

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

#: meta: the millionths a try of the request reserved (it carries crawler-exact-price)
PAID_TRY = "pay_per_crawl"


def _max_price(settings: BaseSettings, name: str) -> str | None:
    text = settings.get(name) or ""
    if not text:
        return None
    price = parse_price(text)
    if price is None or price.micros <= 0:
        return "must be a price above nothing, as the protocol writes it: e.g. USD 0.01"
    if not settings.get("PAY_PER_CRAWL_BUDGET"):
        return "needs PAY_PER_CRAWL_BUDGET: what a crawl may spend in all"
    if not (settings.get("BOT_AUTH_KEY") or settings.getlist("BOT_AUTH_KEYS")):
        return "needs BOT_AUTH_KEY: a paid request is signed (Web Bot Auth), its price covered"
    return None


def _budget(settings: BaseSettings, name: str) -> str | None:
    text = settings.get(name) or ""
    if not text:
        return None
    budget = parse_price(text, negative=True)
    if budget is None:
        return "must be an amount as the protocol writes prices: e.g. USD 5.00"
    if budget.micros < 0:
        return "must not be negative"
    most = parse_price(settings.get("PAY_PER_CRAWL_MAX_PRICE") or "")
    if most is not None and most.currency != budget.currency:
        return f"is in {budget.currency}, PAY_PER_CRAWL_MAX_PRICE in {most.currency}"
    return None


def _reserved(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value <= 10**15


CAPABILITY = Capability(
    name="paycrawl",
    about="pay-per-crawl: priced pages paid within bounds, the ledger (extensions/paycrawl/)",
    settings={
        "PAY_PER_CRAWL_MAX_PRICE": Setting(
            "",
            'the most a page may cost ("USD 0.01"): a 402 whose crawler-price is at or '
            "under it is tried once more, signed, with crawler-exact-price; empty = never "
            "pay (a 402 is dead-lettered as payment_required). Needs PAY_PER_CRAWL_BUDGET "
            "and BOT_AUTH_KEY",
            _max_price,
        ),
        "PAY_PER_CRAWL_BUDGET": Setting(
            "",
            "what each crawl (crawl id) may spend in all, in the same currency; a page that "
            "would pass it is dead-lettered as payment_required, never paid",
            _budget,
        ),
    },
    keys={
        "payments": Key(
            "%(name)s:payments",
            "hash",
            "spent:CRAWL, reserved:CRAWL (tries in flight), pages:CRAWL: each crawl's "
            "pay-per-crawl ledger in millionths of the currency (CRAWL '' = no id)",
            "pay_ledger.lua (paycrawl/middleware.py)",
        ),
    },
    downloader_middlewares={"extensions.paycrawl.middleware.PayPerCrawlMiddleware": 600},
    frontier_parts={"extensions.paycrawl.part.PaymentsPart": 120},
    control_meta={PAID_TRY: _reserved},
)
