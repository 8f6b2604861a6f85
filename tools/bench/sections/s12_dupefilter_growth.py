"""``make bench`` section 12: the dupefilter's AOF bytes, time and memory at 1M and 10M
seen URLs."""

from __future__ import annotations

from tools.bench.base import Bench, Section
from tools.bench_measures import dupefilter_growth
from tools.bench_reports import report_growth


class DupefilterGrowth(Section):
    number = 12
    title = "the dupefilter's AOF bytes, time and memory at 1M and 10M seen URLs"

    once = True  # one long fill

    def measure(self, bench: Bench, run: int) -> None:
        self.growth = dupefilter_growth(bench.work)

    def report(self, bench: Bench) -> None:
        report_growth(self.growth)
