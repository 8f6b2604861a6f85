"""``make bench`` section 32: an address shared by forty hosts, used to its rate
(one frontier and a sharded one), the limit held."""

from __future__ import annotations

from tools import address_bench
from tools.bench.base import Bench, Section


class SharedAddress(Section):
    number = 32
    title = "an address shared by forty hosts: its rate used, its limit held"

    once = True  # two crawls of minutes each, paced by the address: the figures are rates

    def measure(self, bench: Bench, run: int) -> None:
        self.result = address_bench.measure(bench.redis_url, bench.work / "shared_address")

    def report(self, bench: Bench) -> None:
        print(f"\n32. {self.title}")
        address_bench.report(self.result)
