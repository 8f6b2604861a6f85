"""A stats collector for the tests' nodes: Scrapy's, which also writes the
closing stats as JSON to ``STATS_DUMP_FILE``, so a test reads a node's counters
from there rather than from its log text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from scrapy.statscollectors import MemoryStatsCollector


class DumpingStatsCollector(MemoryStatsCollector):
    def _persist_stats(self, stats: dict[str, Any]) -> None:
        super()._persist_stats(stats)
        path = self._crawler.settings.get("STATS_DUMP_FILE")
        if path:
            Path(path).write_text(json.dumps(stats, default=str))
