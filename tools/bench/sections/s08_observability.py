"""``make bench`` section 8: what metrics and heartbeats cost."""

from __future__ import annotations

from servers import services
from tools.bench.base import Bench, Section
from tools.bench_crawl import RUNS, Figures, crawl_once
from tools.bench_measures import OBSERVABILITY


class Observability(Section):
    number = 8
    title = "what metrics and heartbeats cost"

    def __init__(self) -> None:
        self.figures = {name: Figures() for name in OBSERVABILITY}

    def measure(self, bench: Bench, run: int) -> None:
        for name, settings in OBSERVABILITY.items():
            if "METRICS_PORT" in settings:
                settings = {**settings, "METRICS_PORT": str(services.free_port())}
            self.figures[name].samples.append(
                crawl_once(bench.redis_url, settings, 1, bench.work / f"obs-{run}")
            )

    def report(self, bench: Bench) -> None:
        print(f"\n8. Observability cost, one node, same shop crawl, median of {RUNS}")
        base = self.figures["metrics off, heartbeats every 60 s"].rate
        for name, figures in self.figures.items():
            print(f"   {name:52s} {figures.rate:8.0f} pages/s {figures.rate / base:6.2f}x")
