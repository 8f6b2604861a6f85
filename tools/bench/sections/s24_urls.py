"""``make bench`` section 24: one page, one URL: fetches and items per page, chain CPU,
digest bytes at 10M."""

from __future__ import annotations

from tools import urls_bench
from tools.bench.base import Bench, Section


class Urls(Section):
    number = 24
    title = "one page, one URL: fetches and items per page, chain CPU, digest bytes at 10M"

    once = True  # ten million digests filled; the figures are counts, bytes and CPU per URL

    def measure(self, bench: Bench, run: int) -> None:
        self.result = urls_bench.measure(bench.redis_url, bench.work / "urls")

    def report(self, bench: Bench) -> None:
        print("\n24. One page, one URL: the normalizer chain, content duplicates, canonicals")
        urls_bench.report(self.result)
