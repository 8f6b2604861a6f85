"""``make bench`` section 22: host pushback on evidence: broken pages, a limiter, an
overloaded and a banning host."""

from __future__ import annotations

from tools import evidence_bench
from tools.bench.base import Bench, Section


class PushbackEvidence(Section):
    number = 22
    title = "host pushback on evidence: broken pages, a limiter, an overloaded and a banning host"

    once = True  # two crawls of a few minutes

    def measure(self, bench: Bench, run: int) -> None:
        self.rows = evidence_bench.measure(bench.redis_url, bench.work / "evidence")

    def report(self, bench: Bench) -> None:
        evidence_bench.report(self.rows)
