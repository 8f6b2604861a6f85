"""``make bench`` section 2: one and two nodes on one Redis."""

from __future__ import annotations

from tools.bench.base import Bench, Section
from tools.bench_crawl import Figures, crawl_once
from tools.bench_reports import report_scale


class Nodes(Section):
    number = 2
    title = "one and two nodes on one Redis"

    def __init__(self) -> None:
        self.scale = {n: Figures() for n in (1, 2)}

    def measure(self, bench: Bench, run: int) -> None:
        for n, figures in self.scale.items():
            figures.samples.append(crawl_once(bench.redis_url, {}, n, bench.work / f"scale-{run}"))

    def report(self, bench: Bench) -> None:
        report_scale(self.scale)
