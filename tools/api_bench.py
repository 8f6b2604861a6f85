"""``make bench`` section 35: the Firecrawl-compatible API (``scrapy api``).

* Latency of ``POST /v2/scrape`` for a live fetch (``maxAge: 0``): a page of
  the demo shop (no latency of its own) through one node of the ``web`` spider,
  each call a crawl of its own, queued, leased, fetched, archived, kept and
  answered;
* and for the same pages again with Firecrawl's default ``maxAge``: answered
  from the WARC archive (the capture index, one record read by its offset, the
  document made again), no request at the site.
* Documents a second read through ``GET /v2/crawl/{id}``, paged with ``next``,
  from a finished crawl of the shop.
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
    warc = {"WARC_ENABLED": "True", "WARC_DIR": str(work / "warc")}
    node = services.start_node("web", redis_url, log=work / "node.log",
                               settings={"LOG_LEVEL": "WARNING", **warc})  # fmt: skip
    port = services.free_port()
    api = subprocess.Popen(
        [sys.executable, "-m", "scrapy", "api", "--port", str(port), "-s", f"REDIS_URL={redis_url}",
         "-s", f"API_KEYS={hashed}", "-s", "API_RATE_LIMIT=100000",
         *(arg for name, value in warc.items() for arg in ("-s", f"{name}={value}"))],
        cwd=services.ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        services.wait_for_port(port, 60, "scrapy api", api)
        base = f"http://127.0.0.1:{port}"
        _call(base + "/v2/scrape", key, {"url": site.url + "/about"})  # the node warm
        took: dict[str, list[float]] = {"miss": [], "hit": []}
        for max_age in (0, None):  # live, then from the archive
            for n in range(SCRAPES):
                asked: dict = {"url": f"{site.url}/product/{n + 1}"}
                if max_age is not None:
                    asked["maxAge"] = max_age
                started = time.perf_counter()
                answer = _call(base + "/v2/scrape", key, asked)
                took[answer["data"]["metadata"]["cacheState"]].append(time.perf_counter() - started)
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
    return {
        "scrape_ms": {state: _figures(times) for state, times in took.items()},
        "documents": read,
        "documents_per_second": read / read_seconds if read_seconds else 0.0,
    }


def _figures(times: list[float]) -> dict:
    if not times:
        return {"calls": 0, "median": 0.0, "p90": 0.0}
    p90 = sorted(times)[max(int(len(times) * 0.9) - 1, 0)]
    return {"calls": len(times), "median": statistics.median(times) * 1000, "p90": p90 * 1000}


def report(result: dict) -> None:
    said = {"miss": "a live fetch through one node (maxAge 0)",
            "hit": "the same pages from the archive (default maxAge)"}  # fmt: skip
    for state, figures in result["scrape_ms"].items():
        print(f"   POST /v2/scrape, {said[state]}: {figures['median']:.0f} ms median, "
              f"{figures['p90']:.0f} ms p90 ({figures['calls']} calls)")  # fmt: skip
    live, archived = (result["scrape_ms"][s]["median"] for s in ("miss", "hit"))
    if live and archived:
        print(f"    from the archive: {archived / live:.2f}x a live fetch's time")
    rate = result["documents_per_second"]
    print(f"   GET /v2/crawl/ID, paged with next: {rate:,.0f} documents/s "
          f"({result['documents']} documents of a finished crawl)")  # fmt: skip
