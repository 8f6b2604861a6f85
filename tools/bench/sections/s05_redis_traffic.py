"""``make bench`` section 5: Redis commands and round trips per page, from section 1's crawls."""

from __future__ import annotations

from tools.bench.base import Bench
from tools.bench.sections.s01_one_node import OneNode
from tools.bench_reports import report_commands


class RedisTraffic(OneNode):
    number = 5
    title = "Redis commands and round trips per page, from section 1's crawls"

    def report(self, bench: Bench) -> None:
        report_commands(bench.one_node)
