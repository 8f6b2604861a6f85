"""``make bench`` section 27: WARC capture: CPU per page and pages/s with it on and
off, bytes, reparse."""

from __future__ import annotations

from tools import warc_bench
from tools.bench.base import Bench, Section
from tools.bench_crawl import RUNS, Figures, crawl_once
from tools.warc_bench import WARC_VARIANTS, reparse_once


class Warc(Section):
    number = 27
    title = "WARC capture: CPU per page and pages/s with it on and off, bytes, reparse"

    def __init__(self) -> None:
        self.figures = {name: Figures() for name in [*WARC_VARIANTS, "scrapy reparse"]}
        self.bytes_per_page: dict[str, list[float]] = {name: [] for name in WARC_VARIANTS}
        self.real: dict | None = None

    def measure(self, bench: Bench, run: int) -> None:
        for number, (name, settings) in enumerate(WARC_VARIANTS.items()):
            work = bench.work / f"warc-{run}-{number}"  # each variant's files its own
            sample = crawl_once(bench.redis_url, settings, 1, work)
            self.figures[name].samples.append(sample)
            if settings:
                size = sum(path.stat().st_size for path in (work / "warc").glob("*.warc.gz"))
                self.bytes_per_page[name].append(size / max(sample.pages, 1))
            if name == "WARC_ENABLED":
                self.figures["scrapy reparse"].samples.append(reparse_once(bench.redis_url, work))
        if run == 0:  # real pages, once: larger, and what the shop's are not
            self.real = warc_bench.measure(bench.redis_url, bench.work / "warc-real")

    def report(self, bench: Bench) -> None:
        print(f"\n27. WARC capture, one node, the shop crawl, median of {RUNS}")
        print(f"   {'variant':40s} {'pages/s':>8s} {'CPU ms/page':>12s} {'bytes/page':>11s}")
        for name, figures in self.figures.items():
            sizes = sorted(self.bytes_per_page.get(name) or [0])
            size = f"{sizes[len(sizes) // 2]:11,.0f}" if sizes[-1] else f"{'':11s}"
            print(f"   {name:40s} {figures.rate:8.0f} {figures.cpu_ms_per_page:12.2f} {size}")
        on, off = self.figures["WARC_ENABLED"], self.figures["WARC off"]
        again = self.figures["scrapy reparse"]
        if off.rate and off.cpu_ms_per_page:
            print(f"   with WARC / without: {on.rate / off.rate:.2f}x pages/s, "
                  f"{on.cpu_ms_per_page / off.cpu_ms_per_page:.2f}x CPU per page")  # fmt: skip
        if on.rate and on.cpu_ms_per_page:
            print(f"   reparse / the crawl that archived it: {again.rate / on.rate:.2f}x pages/s, "
                  f"{again.cpu_ms_per_page / on.cpu_ms_per_page:.2f}x CPU per page")  # fmt: skip
        print("   bytes: request, response and metadata records, gzip each; one node on the "
              "shop meets no duplicate payload, so revisits save nothing here")  # fmt: skip
        warc_bench.report(self.real)
