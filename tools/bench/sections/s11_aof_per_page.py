"""``make bench`` section 11: AOF bytes per crawled page: stock scrapy-redis and this project."""

from __future__ import annotations

from tools.bench.base import Bench, Section
from tools.bench_measures import AOF_VARIANTS, aof_per_page
from tools.bench_reports import report_aof


class AofPerPage(Section):
    number = 11
    title = "AOF bytes per crawled page: stock scrapy-redis and this project"

    def __init__(self) -> None:
        self.aof: dict[str, list[float]] = {name: [] for name in AOF_VARIANTS}

    def measure(self, bench: Bench, run: int) -> None:
        for n, name in enumerate(AOF_VARIANTS):  # a directory each: a fresh AOF
            self.aof[name].append(aof_per_page(name, bench.work / f"aof-{run}-{n}"))

    def report(self, bench: Bench) -> None:
        report_aof(self.aof)
