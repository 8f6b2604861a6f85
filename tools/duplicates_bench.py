"""``make bench`` section 29: what content duplicates (``CONTENT_DUPLICATES``, "mark"
by default) cost a page. One node crawls the demo shop, and the ``site`` spider
Python's documentation (Debian's python3-doc) served by nginx on one loopback
address, each with the check on ("mark", near duplicates marked too, as by default)
and off, run alternately; CPU is the node's own. The docs part is skipped without
python3-doc or nginx (``make system-tools`` installs them)."""

from __future__ import annotations

import json
from pathlib import Path

from servers import services
from servers.clients import redis_at

HOST = "127.0.0.84"
ALLOW = r"^http://127\.0\.0\.84:\d+/"  # the one copy, no link out
UNLIMITED = 100_000
MODES = ("mark", "off")


def _docs_crawl(mode: str, redis_url: str, start: str, work: Path) -> dict:
    client = redis_at(redis_url)
    client.flushall()
    client.lpush("site:start_urls", start)
    client.close()
    settings = {"MAX_IDLE_TIME_BEFORE_CLOSE": "2", "LOG_LEVEL": "WARNING",
                "ITEMS_DIR": str(work / "items"), "CONTENT_DUPLICATES": mode}  # fmt: skip
    node = services.start_node("site", redis_url, log=work / "node.log", settings=settings,
                               spider_args={"allow": ALLOW})  # fmt: skip
    cpu = services.wait_node(node, work / "node.log")
    lines = [json.loads(line) for path in (work / "items").rglob("*.jsonl")
             for line in path.read_text().splitlines()]  # fmt: skip
    marked = sum(1 for item in lines if item.get("duplicate_of") or item.get("near_duplicate_of"))
    return {"pages": len(lines), "cpu": cpu, "marked": marked}
