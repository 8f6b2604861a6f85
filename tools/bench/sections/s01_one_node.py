"""``make bench`` section 1: one node against plain Scrapy and stock scrapy-redis:
pages/s, CPU, commands."""

from __future__ import annotations

from tools.bench.base import Bench, Section
from tools.bench_reports import report


class OneNode(Section):
    number = 1
    title = "one node against plain Scrapy and stock scrapy-redis: pages/s, CPU, commands"

    def measure(self, bench: Bench, run: int) -> None:
        bench.crawl_one_node(run)

    def report(self, bench: Bench) -> None:
        report(bench.one_node, bench.start_cpu)
