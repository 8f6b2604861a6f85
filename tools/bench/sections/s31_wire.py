"""``make bench`` section 31: HTTPS at the cost of plain HTTP: CPU per page against
plain Scrapy, and TLS handshakes per page with 1, 2 and 4 nodes."""

from __future__ import annotations

from tools import wire_bench
from tools.bench.base import Bench, Section


class Wire(Section):
    number = 31
    title = "HTTPS: CPU per page against plain Scrapy and plain HTTP; handshakes per page"

    once = True

    def measure(self, bench: Bench, run: int) -> None:
        self.result = wire_bench.measure(bench.redis_url, bench.work / "wire")

    def report(self, bench: Bench) -> None:
        print(f"\n31. {self.title}")
        wire_bench.report(self.result)
