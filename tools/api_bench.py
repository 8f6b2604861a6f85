"""``make bench`` section 35: the Firecrawl-compatible API (``scrapy api``).

* Latency of ``POST /v2/scrape`` for a live fetch: a page of the demo shop
  (no latency of its own) through one node of the ``web`` spider, each call a
  crawl of its own, queued, leased, fetched, kept and answered.
* Documents a second read through ``GET /v2/crawl/{id}``, paged with ``next``,
  from a finished crawl of the shop.

(``maxAge`` answers from the archive are not made yet: every scrape is live.)
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from extensions.api.apikeys import new_key
from servers import services
from servers.clients import redis_at

SCRAPES = 30
CRAWL_LIMIT = 500


def _call(url: str, key: str, body: dict | None = None) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method="POST" if body else "GET",
                                     headers={"Content-Type": "application/json",
                                              "Authorization": f"Bearer {key}"})  # fmt: skip
    with urllib.request.urlopen(request, timeout=120) as answer:
        return json.load(answer)


def measure(redis_url: str, work: Path) -> dict:
    redis_url = redis_url.rsplit("/", 1)[0] + "/7"  # a database of its own
    redis_at(redis_url).flushdb()
    key, hashed = new_key()
    site = services.start_demo_site()
    node = services.start_node("web", redis_url, log=work / "node.log",
                               settings={"LOG_LEVEL": "WARNING"})  # fmt: skip
    port = services.free_port()
    api = subprocess.Popen(
        [sys.executable, "-m", "scrapy", "api", "--port", str(port), "-s", f"REDIS_URL={redis_url}",
         "-s", f"API_KEYS={hashed}", "-s", "API_RATE_LIMIT=100000"],
        cwd=services.ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        services.wait_for_port(port, 60, "scrapy api", api)
        base = f"http://127.0.0.1:{port}"
        _call(base + "/v2/scrape", key, {"url": site.url + "/about"})  # the node warm
        took = []
        for n in range(SCRAPES):
            started = time.perf_counter()
            _call(base + "/v2/scrape", key, {"url": f"{site.url}/product/{n + 1}"})
            took.append(time.perf_counter() - started)
        asked = {"url": site.url + "/", "limit": CRAWL_LIMIT, "sitemap": "skip"}
        started_crawl = _call(base + "/v2/crawl", key, asked)
        status_url = started_crawl["url"]
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            status = _call(status_url, key)
            if status["status"] != "scraping":
                break
            time.sleep(1)
        read, started = 0, time.perf_counter()
        url: str | None = status_url
        while url:
            page = _call(url, key)
            read += len(page["data"])
            url = page.get("next")
        read_seconds = time.perf_counter() - started
    finally:
        services.stop(api)
        services.stop(node, timeout=30)
        site.stop()
    p90 = sorted(took)[int(len(took) * 0.9) - 1]
    return {
        "scrape_ms": {"median": statistics.median(took) * 1000, "p90": p90 * 1000},
        "documents": read,
        "documents_per_second": read / read_seconds if read_seconds else 0.0,
    }


def report(result: dict) -> None:
    scrape = result["scrape_ms"]
    print(f"   POST /v2/scrape, a live fetch through one node: {scrape['median']:.0f} ms median, "
          f"{scrape['p90']:.0f} ms p90 ({SCRAPES} pages of the demo shop)")  # fmt: skip
    rate = result["documents_per_second"]
    print(f"   GET /v2/crawl/ID, paged with next: {rate:,.0f} documents/s "
          f"({result['documents']} documents of a finished crawl)")  # fmt: skip
    print("   (maxAge from the archive: not made yet; every scrape is a live fetch)")
