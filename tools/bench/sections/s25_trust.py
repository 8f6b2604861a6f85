"""``make bench`` section 25: a crawler sites can trust: signing a request, reading a
page's robots directives."""

from __future__ import annotations

from tools import trust_bench
from tools.bench.base import Bench, Section


class Trust(Section):
    number = 25
    title = "a crawler sites can trust: signing a request, reading a page's robots directives"

    once = True  # CPU per request and per page, measured in this process

    def measure(self, bench: Bench, run: int) -> None:
        self.result = trust_bench.measure()

    def report(self, bench: Bench) -> None:
        print("\n25. A crawler sites can trust")
        trust_bench.report(self.result)
