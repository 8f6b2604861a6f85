"""``make bench`` section 9: seconds from a pushed start URL to its fetch on an idle node."""

from __future__ import annotations

from tools.bench.base import Bench, Section
from tools.bench_measures import WAKE_VARIANTS, wake_latencies
from tools.bench_reports import report_wake


class Wake(Section):
    number = 9
    title = "seconds from a pushed start URL to its fetch on an idle node"

    def __init__(self) -> None:
        self.wakes: dict[str, list[float]] = {name: [] for name in WAKE_VARIANTS}

    def measure(self, bench: Bench, run: int) -> None:
        workdir = bench.work / f"wake-{run}"
        for name in WAKE_VARIANTS:
            self.wakes[name] += wake_latencies(bench.redis_url, name, workdir, run)

    def report(self, bench: Bench) -> None:
        report_wake(self.wakes)
