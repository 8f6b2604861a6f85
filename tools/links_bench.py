"""``make bench`` section 28: the link path on real HTML. Python's documentation
(Debian's python3-doc) served by nginx on three loopback addresses, crawled whole by
plain Scrapy with a feed export (what a user runs instead), plain Scrapy with the
node's collector tuning, the ``site`` spider, a DistributedSpider written as the
plain one is but with ``follow_links``, and one with the plain one's parsing as it is
(``response.follow``), the last three with content duplicates off, as the three copies
stand for three sites. CPU is the crawling process's own; pages/s
from the first to the last request nginx logged. Skipped without python3-doc or
nginx (``make system-tools`` installs them)."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from scrapy.http import HtmlResponse, Request
from scrapy.linkextractors import LinkExtractor

from servers import services
from servers.clients import redis_at
from servers.nginx import PYTHON_DOCS
from tools.bench_crawl import BENCH_SPIDERS, NO_ADDON

HOSTS = ["127.0.0.81", "127.0.0.82", "127.0.0.83"]
ALLOW = r"^http://127\.0\.0\.8\d:\d+/"  # the three copies, no link out
UNLIMITED = 100_000
PLAIN, TUNED = "plain Scrapy (feed export)", "plain Scrapy + the node's collector tuning"
SITE, FOLLOW = "the site spider", "a DistributedSpider with follow_links"
UNPORTED = "a DistributedSpider with response.follow"
TUNING = {
    "EXTENSIONS": '{"extensions.gctuning.GarbageCollectorTuning": 100}',
    "SPIDER_MIDDLEWARES": '{"extensions.gctuning.ResponseRelease": 25}',
}


def _crawl(name: str, redis_url: str, starts: list[str], work: Path, logs: list[Path]) -> dict:
    client = redis_at(redis_url)
    client.flushall()
    for log in logs:
        log.write_text("")
    settings: dict[str, str] = {"MAX_IDLE_TIME_BEFORE_CLOSE": "2", "LOG_LEVEL": "WARNING",
                                "ITEMS_DIR": str(work / "items")}  # fmt: skip
    args = {"allow": ALLOW}
    spider = {PLAIN: "plain_site", TUNED: "plain_site", SITE: "site", FOLLOW: "follow_site",
              UNPORTED: "follow_plain_site"}[name]  # fmt: skip
    if spider == "plain_site":
        feed = {str(work / "items" / "items.jsonl"): {"format": "jsonlines", "overwrite": True}}
        settings.update(ADDONS=NO_ADDON, FEEDS=json.dumps(feed))
        settings.update(TUNING if name == TUNED else {})
        args["start"] = ",".join(starts)
    else:
        client.lpush(f"{spider}:start_urls", *starts)
        # the three hosts serve one copy of the docs each, standing for three sites:
        # content duplicates would take two for mirrors and store a third of what
        # plain Scrapy stores (section 29 measures the check itself)
        settings["CONTENT_DUPLICATES"] = "off"
    settings["SPIDER_MODULES"] = BENCH_SPIDERS
    client.close()
    node = services.start_node(spider, redis_url, log=work / "node.log", settings=settings,
                               spider_args=args)  # fmt: skip
    cpu = services.wait_node(node, work / "node.log")
    # without nginx's ports, which each run picks afresh: runs compare page for page
    stored = {_without_port(json.loads(line)["url"]) for path in (work / "items").rglob("*.jsonl")
              for line in path.read_text().splitlines()}  # fmt: skip
    times = [float(line.split()[0]) for log in logs for line in log.read_text().splitlines()]
    seconds = max(times) - min(times) if times else 0.0
    return {"pages": len(stored), "stored": stored, "cpu": cpu,
            "rate": (len(times) - 1) / seconds if seconds else 0.0}  # fmt: skip


def _without_port(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=parts.hostname or ""))


def links_per_page(sample: int = 60) -> float:
    """The links Scrapy's extractor finds on a page of the docs, every tenth page."""
    pages = sorted(PYTHON_DOCS.rglob("*.html"))[::10][:sample]
    extractor, total = LinkExtractor(), 0
    for page in pages:
        url = "http://127.0.0.81:8080/" + str(page.relative_to(PYTHON_DOCS))
        total += len(extractor.extract_links(
            HtmlResponse(url, body=page.read_bytes(), request=Request(url))))  # fmt: skip
    return total / max(len(pages), 1)
