"""``make bench`` section 36: host affinity on many small HTTPS hosts: full TLS
handshakes a page with and without it, on 2 and 4 nodes."""

from __future__ import annotations

from tools import affinity_bench
from tools.bench.base import Bench, Section


class HostAffinity(Section):
    number = 36
    title = "host affinity: sixty small HTTPS hosts over 2 and 4 nodes"

    once = True

    def measure(self, bench: Bench, run: int) -> None:
        self.result = affinity_bench.measure(bench.redis_url, bench.work / "affinity")

    def report(self, bench: Bench) -> None:
        print(f"\n36. {self.title}")
        affinity_bench.report(self.result)
