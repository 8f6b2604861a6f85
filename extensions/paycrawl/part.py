"""What ``scrapy status`` says of a crawl's payments: its ledger, per crawl id."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy.exceptions import NotConfigured

from extensions.frontier.part import FrontierPart, StatusView
from extensions.paycrawl.ledger import Ledger
from extensions.paycrawl.price import Price

if TYPE_CHECKING:
    from extensions.frontier.context import PartContext


class PaymentsPart(FrontierPart):
    @classmethod
    def from_context(cls, context: PartContext) -> PaymentsPart:
        raise NotConfigured  # the status's alone: the middleware pays, the script counts

    @classmethod
    def status(cls, view: StatusView) -> dict[str, Any]:
        ledger = Ledger(view.server, view.keys)
        entries = ledger.entries()
        if not entries:
            return {}
        return {"payments_currency": ledger.currency(), "payments": [
            {"crawl": e.crawl, "spent_micros": e.spent, "reserved_micros": e.reserved,
             "pages": e.pages} for e in entries
        ]}  # fmt: skip

    @classmethod
    def status_lines(cls, status: dict[str, Any]) -> list[str]:
        lines = []
        currency = status.get("payments_currency") or "?"
        for entry in status.get("payments", []):
            which = f"crawl {entry['crawl']}" if entry["crawl"] else "the crawl"
            spent = Price(currency, entry["spent_micros"])
            lines.append(f"paid for pages ({which}): {spent} on {entry['pages']} pages")
        return lines
