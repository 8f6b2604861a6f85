"""``make bench`` section 7: the middleware stack (proxies, user agents, rate checks)
through a proxy."""

from __future__ import annotations

from tools.bench.base import Bench, Section
from tools.bench_crawl import Figures, crawl_once
from tools.bench_measures import stack_variants
from tools.bench_reports import report_stack


class MiddlewareStack(Section):
    number = 7
    title = "the middleware stack (proxies, user agents, rate checks) through a proxy"

    def __init__(self) -> None:
        self.stack: dict[str, Figures] = {}

    def measure(self, bench: Bench, run: int) -> None:
        workdir = bench.work / f"stack-{run}"
        for name, (settings, env) in stack_variants(bench.proxy_url).items():
            spider = "plain_shop" if name.startswith("plain") else "shop"
            self.stack.setdefault(name, Figures()).samples.append(
                crawl_once(bench.redis_url, settings, 1, workdir, env=env, spider=spider)
            )

    def report(self, bench: Bench) -> None:
        report_stack(self.stack)
