"""A crawl's pay-per-crawl ledger in Redis (``NAME:payments``): what it spent,
what tries in flight have reserved, and the pages it paid for, per crawl id."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from extensions import connection
from extensions.frontier.redisops import fields, load_script, run_named

if TYPE_CHECKING:
    import redis

    from extensions.keys import SpiderKeys


@dataclass(frozen=True)
class Entry:
    crawl: str
    spent: int = 0
    reserved: int = 0
    pages: int = 0


class Ledger:
    def __init__(self, server: redis.Redis, keys: SpiderKeys):
        self.server = server
        self.key = keys.named("payments")
        self._script = server.register_script(load_script("extensions.paycrawl:pay_ledger"))

    def _run(self, op: str, crawl: str, amount: int, charged: int = 0,
             budget: int = 0, currency: str = "") -> dict[str, Any]:  # fmt: skip
        args = {"op": op, "crawl": crawl, "amount": amount, "charged": charged,
                "budget": budget, "currency": currency}  # fmt: skip
        return fields(run_named(self._script, {"ledger": self.key}, args))

    def reserve(self, crawl: str, amount: int, budget: int, currency: str) -> tuple[bool, int]:
        """Whether ``amount`` fits in the crawl's budget (then it is reserved),
        and what the budget has left after it. Raises RedisError."""
        result = self._run("reserve", crawl, amount, budget=budget, currency=currency)
        return bool(int(result["ok"])), int(result["left"])

    def settle(self, crawl: str, reserved: int, charged: int) -> None:
        """A paid try answered: its reservation goes, what it was charged is spent."""
        self._run("settle", crawl, reserved, charged=charged)

    def release(self, crawl: str, reserved: int) -> None:
        """A paid try that was not charged: its reservation goes."""
        self._run("release", crawl, reserved)

    def currency(self) -> str:
        return connection.text(self.server.hget(self.key, "currency") or b"")

    def entries(self) -> list[Entry]:
        raw: Any = self.server.hgetall(self.key)
        by_crawl: dict[str, dict[str, int]] = {}
        for name, value in raw.items():
            what, _, crawl = connection.text(name).partition(":")
            try:
                by_crawl.setdefault(crawl, {})[what] = int(value)
            except ValueError:
                continue  # not a figure this ledger wrote
        return [
            Entry(crawl, f.get("spent", 0), f.get("reserved", 0), f.get("pages", 0))
            for crawl, f in sorted(by_crawl.items())
            if set(f) <= {"spent", "reserved", "pages"}
        ]
