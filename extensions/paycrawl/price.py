"""Prices as pay-per-crawl writes them: ``USD 0.01``, a currency code and a
decimal amount, kept as whole millionths so that sums in Redis are exact."""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

PRICE = re.compile(r"^\s*([A-Za-z]{3})\s+(-?[0-9]+(?:\.[0-9]+)?)\s*$")
MICROS = Decimal(1_000_000)
#: the largest amount taken (a billion in any currency): past it a header is no price
MOST = 10**15


@dataclass(frozen=True)
class Price:
    currency: str
    micros: int

    def __str__(self) -> str:
        amount = (Decimal(self.micros) / MICROS).normalize()
        text = f"{amount:f}"
        if "." not in text:
            text += ".00"
        elif len(text.split(".")[1]) < 2:
            text += "0"
        return f"{self.currency} {text}"

    def minus(self, micros: int) -> Price:
        return Price(self.currency, self.micros - micros)


def parse_price(value: bytes | str | None, *, negative: bool = False) -> Price | None:
    """``USD 0.01`` -> Price('USD', 10000); None for anything else (a sub-millionth
    part is rounded down: a price is never read as more than it says)."""
    if value is None:
        return None
    text = value.decode("latin-1") if isinstance(value, bytes) else value
    match = PRICE.match(text[:64])
    if match is None:
        return None
    try:
        amount = Decimal(match.group(2))
    except InvalidOperation:
        return None
    micros = int(amount * MICROS)
    if abs(micros) > MOST or (micros < 0 and not negative):
        return None
    return Price(match.group(1).upper(), micros)
