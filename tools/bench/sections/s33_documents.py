"""``make bench`` section 33: documents for search and language models: CPU per
page against the libraries alone and with documents off; bytes per document."""

from __future__ import annotations

from tools import documents_bench
from tools.bench.base import Bench, Section


class Documents(Section):
    number = 33
    title = "documents: CPU per page against the libraries alone and without; bytes each"

    once = True

    def measure(self, bench: Bench, run: int) -> None:
        self.result = documents_bench.measure(bench.redis_url, bench.work / "documents")

    def report(self, bench: Bench) -> None:
        print(f"\n33. {self.title}")
        documents_bench.report(self.result)
