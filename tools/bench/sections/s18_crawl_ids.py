"""``make bench`` section 18: crawl ids: their cost per page, and a paused crawl's
weight on the others."""

from __future__ import annotations

from tools import crawls_bench
from tools.bench.base import CRAWL_ID_VARIANTS, WITH_CRAWL_ID, WITHOUT_CRAWL_ID, Bench, Section
from tools.bench_crawl import RUNS, Figures, crawl_once


class CrawlIds(Section):
    number = 18
    title = "crawl ids: their cost per page, and a paused crawl's weight on the others"

    def __init__(self) -> None:
        self.figures = {name: Figures() for name in CRAWL_ID_VARIANTS}
        self.paused: list[dict[str, float]] = []

    def measure(self, bench: Bench, run: int) -> None:
        for name, crawl in CRAWL_ID_VARIANTS.items():
            self.figures[name].samples.append(
                crawl_once(bench.redis_url, {}, 1, bench.work / f"crawl-ids-{run}", crawl=crawl)
            )
        if run == 0:
            self.paused = crawls_bench.measure(bench.redis_url)

    def report(self, bench: Bench) -> None:
        print(f"\n18. Crawl ids, one node, the shop crawl, median of {RUNS}")
        print(f"   {'variant':40s} {'pages/s':>8s} {'CPU ms/page':>12s} {'commands':>9s} "
              f"{'round trips':>12s}")  # fmt: skip
        base = self.figures[WITHOUT_CRAWL_ID]
        for name, figures in self.figures.items():
            trips = figures.round_trips_per_page
            print(f"   {name:40s} {figures.rate:8.0f} {figures.cpu_ms_per_page:12.2f} "
                  f"{figures.calls_per_page:9.2f} {trips:12.3f}")  # fmt: skip
        ours = self.figures[WITH_CRAWL_ID]
        if base.rate:
            print(f"   under a crawl id / without: {ours.rate / base.rate:.2f}x pages/s, "
                  f"{ours.calls_per_page - base.calls_per_page:+.2f} commands a page")  # fmt: skip
        crawls_bench.report(self.paused)
