"""``make bench`` section 19: rendering: a render node against scrapy-playwright; what
RENDER_AUTO saves."""

from __future__ import annotations

from tools import render_bench
from tools.bench.base import Bench, Section


class Rendering(Section):
    number = 19
    title = "rendering: a render node against scrapy-playwright; what RENDER_AUTO saves"

    once = True  # a few minutes of browsing; its figures are far apart

    def measure(self, bench: Bench, run: int) -> None:
        if render_bench.find_browser() is None:
            self.rendered, self.auto = {}, {}
            return
        self.rendered = render_bench.rendering(bench.redis_url, bench.work / "render")
        self.auto = render_bench.auto_mode(bench.redis_url, bench.work / "render-auto")

    def report(self, bench: Bench) -> None:
        if not self.rendered:
            print("\n19. Rendering: skipped, no Chromium on this machine (make system-tools)")
            return
        render_bench.report(self.rendered, self.auto)
