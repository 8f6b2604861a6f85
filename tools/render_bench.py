"""``make bench`` section 19: rendering JavaScript pages.

* One render node of this project against plain scrapy-playwright on one node
  (a Scrapy project with its download handler, ``meta["playwright"]`` on every
  request, items to a feed export), on the same pages: the demo site's ``/js/``
  shop and PAGES of its item pages more, four pages open at once on both sides.
  Rendered pages/s and the peak memory of the browser (the node's processes
  below its Python: Playwright's driver and Chromium, proportional set size,
  sampled every SAMPLE_EVERY s).
* RENDER_AUTO on a site that mixes static and JavaScript pages (STATIC shop
  pages, the /js/ shop): the plain fetches it spends, against fetching every JS
  page plainly first (nothing learned: RENDER_AUTO_MAX_PATTERNS = 0) and against
  rendering every page.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

from demosite import catalog, jspages
from extensions.render.browser import find_browser, launch_options, process_rss, tree_rss
from servers import services
from servers.clients import redis_at
from tools.bench_crawl import BENCH_SPIDERS, FEED, NO_ADDON

PAGES = 600  # item pages crawled besides the /js/ shop (each with its own query)
STATIC = 150  # static shop pages in the mixed site
SAMPLE_EVERY = 0.5
JS_PAGES = 3 + jspages.JS_ITEMS
CONCURRENCY = "4"
PLAYWRIGHT = "plain scrapy-playwright (one node, feed export)"
OURS = "this project, one render node"
AUTO_VARIANTS = {
    "render every page (RENDER_URLS = .*)": {"RENDER_URLS": '[".*"]'},
    "RENDER_AUTO, nothing learned (probe every page)": {
        "RENDER_AUTO": "True",
        "RENDER_AUTO_MAX_PATTERNS": "0",
        "RENDER_AUTO_RECHECK": "0",
    },
    "RENDER_AUTO, learned for the cluster": {"RENDER_AUTO": "True", "RENDER_AUTO_RECHECK": "0"},
}


def _peak_browser_memory(proc, stop: threading.Event, peak: list[int]) -> None:
    while not stop.wait(SAMPLE_EVERY):
        held = tree_rss(proc.pid) - process_rss(proc.pid)
        peak[0] = max(peak[0], held)


def _run(args_node, workdir: Path) -> dict[str, float]:
    """Start a node (a callable returning its Popen), wait for it; its figures."""
    began = time.monotonic()
    proc = args_node()
    stop, peak = threading.Event(), [0]
    sampler = threading.Thread(target=_peak_browser_memory, args=(proc, stop, peak), daemon=True)
    sampler.start()
    _, status, _usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    stop.set()
    sampler.join(5)
    seconds = time.monotonic() - began
    if proc.returncode != 0:
        raise RuntimeError(f"render bench node failed ({proc.returncode}); see {workdir}")
    return {"seconds": seconds, "peak_mb": peak[0] / 2**20}


def _stats(log: Path) -> dict[str, int]:
    """The counters Scrapy dumps at the end of a node's log."""
    import ast

    text = log.read_text(errors="replace")
    start = text.rfind("Dumping Scrapy stats:")
    if start < 0:
        return {}
    body = text[text.index("{", start) : text.index("}", start) + 1]
    body = "".join(line for line in body.splitlines() if "datetime" not in line)
    try:
        values = ast.literal_eval(body)
    except (ValueError, SyntaxError):
        return {}
    return {k: v for k, v in values.items() if isinstance(v, int)}


def _lines(path: Path) -> int:
    """Items in a JSON Lines file: one a page on both sides."""
    return len(path.read_text().splitlines()) if path.exists() else 0


def rendering(redis_url: str, workdir: Path) -> dict[str, dict[str, float]]:
    """Pages/s and peak browser memory, ours against plain scrapy-playwright."""
    browser = find_browser()
    assert browser is not None
    client = redis_at(redis_url)
    site = services.start_demo_site()
    figures: dict[str, dict[str, float]] = {}
    try:
        extra = [f"{site.url}/js/item/{n % jspages.JS_ITEMS + 1}?v={n}" for n in range(PAGES)]
        workdir.mkdir(parents=True, exist_ok=True)
        common = {"CONCURRENT_REQUESTS": "32", "LOG_LEVEL": "INFO", "LOGSTATS_INTERVAL": "60"}
        plain_log = workdir / "playwright.log"
        plain_settings = {
            **common,
            "ADDONS": NO_ADDON,
            "SPIDER_MODULES": BENCH_SPIDERS,
            "FEEDS": FEED.replace("{workdir}", str(workdir)),
            "PLAYWRIGHT_LAUNCH_OPTIONS": json.dumps(launch_options(browser)),
            "PLAYWRIGHT_MAX_PAGES_PER_CONTEXT": CONCURRENCY,
        }
        figures[PLAYWRIGHT] = _run(
            lambda: services.start_node(
                "plain_playwright",
                redis_url,
                log=plain_log,
                settings=plain_settings,
                spider_args={"start": f"{site.url}/js/", "more": ",".join(extra)},
            ),
            workdir,
        )
        figures[PLAYWRIGHT]["pages"] = _lines(workdir / "items.jsonl")
        client.flushall()
        client.lpush("jsshop:start_urls", f"{site.url}/js/", *extra)
        ours_log = workdir / "render-node.log"
        figures[OURS] = _run(
            lambda: services.start_node(
                "jsshop",
                redis_url,
                log=ours_log,
                settings={
                    **common,
                    "RENDER_ENABLED": "True",
                    "RENDER_MAX_PAGES": CONCURRENCY,
                    "MAX_IDLE_TIME_BEFORE_CLOSE": "1",
                    "ITEMS_DIR": str(workdir),
                },
            ),
            workdir,
        )
        figures[OURS]["pages"] = sum(_lines(path) for path in workdir.glob("jsshop/*.jsonl"))
    finally:
        site.stop()
        client.close()
    return figures


def auto_mode(redis_url: str, workdir: Path) -> dict[str, dict[str, float]]:
    """What each way of choosing costs on the mixed site."""
    client = redis_at(redis_url)
    out: dict[str, dict[str, float]] = {}
    static = sorted(path for path in catalog.expected_pages() if path.startswith("/product/"))
    try:
        for name, settings in AUTO_VARIANTS.items():
            client.flushall()
            site = services.start_demo_site()
            try:
                seeds = [f"{site.url}{path}" for path in static[:STATIC]] + [f"{site.url}/js/"]
                client.lpush("mixed:start_urls", *seeds)
                log = workdir / f"auto-{len(out)}.log"
                run = _run(
                    lambda log=log, settings=settings: services.start_node(
                        "mixed",
                        redis_url,
                        log=log,
                        settings={
                            "SPIDER_MODULES": BENCH_SPIDERS,
                            "CONCURRENT_REQUESTS": "32",
                            "RENDER_ENABLED": "True",
                            "RENDER_MAX_PAGES": CONCURRENCY,
                            "MAX_IDLE_TIME_BEFORE_CLOSE": "1",
                            "ITEMS_DIR": str(workdir / f"auto-{len(out)}"),
                            "LOG_LEVEL": "INFO",
                            **settings,
                        },
                    ),
                    workdir,
                )
            finally:
                site.stop()
            stats = _stats(log)
            run["rendered"] = stats.get("render/pages", 0)
            run["wasted"] = stats.get("render/auto/mispredicted/plain", 0)
            run["items"] = stats.get("item_scraped_count", 0)
            out[name] = run
    finally:
        client.close()
    return out


def report(rendered: dict[str, dict[str, float]], auto: dict[str, dict[str, float]]) -> None:
    print(f"\n19. Rendering: the /js/ shop and {PAGES} item pages more, one node, four pages open")
    print(f"   {'variant':48s} {'pages':>6s} {'pages/s':>8s} {'browser peak MB':>16s}")
    for name, f in rendered.items():
        rate = f["pages"] / f["seconds"] if f["seconds"] else 0.0
        print(f"   {name:48s} {f['pages']:6.0f} {rate:8.2f} {f['peak_mb']:16.0f}")
    if PLAYWRIGHT in rendered and OURS in rendered:
        theirs, ours = rendered[PLAYWRIGHT], rendered[OURS]
        ratio = (ours["pages"] / ours["seconds"]) / max(theirs["pages"] / theirs["seconds"], 1e-9)
        print(f"   ours / scrapy-playwright: {ratio:.2f}x pages/s, peak browser memory "
              f"{ours['peak_mb']:.0f} MB vs {theirs['peak_mb']:.0f} MB")  # fmt: skip
    print(f"   RENDER_AUTO on a mixed site: {STATIC} static pages and {JS_PAGES} JavaScript pages")
    print(f"   {'variant':48s} {'items':>6s} {'rendered':>9s} {'plain JS':>9s} {'seconds':>8s}")
    for name, f in auto.items():
        print(f"   {name:48s} {f['items']:6.0f} {f['rendered']:9.0f} {f['wasted']:9.0f} "
              f"{f['seconds']:8.1f}")  # fmt: skip
    probe = auto.get("RENDER_AUTO, nothing learned (probe every page)")
    learned = auto.get("RENDER_AUTO, learned for the cluster")
    if probe and learned and probe["wasted"]:
        saved = 1 - learned["wasted"] / probe["wasted"]
        print(f"   learning saves {saved:.0%} of the plain fetches of JavaScript pages "
              f"({learned['wasted']:.0f} instead of {probe['wasted']:.0f})")  # fmt: skip
