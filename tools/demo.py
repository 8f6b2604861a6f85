"""``make demo``: an embedded Redis, the demo shop and two crawler nodes.

Starts everything on 127.0.0.1, seeds the start URL with ``scrapy seed``, waits
until both nodes have closed by themselves, prints what happened, and stops
everything it started, also on Ctrl-C. Set ``REDIS_URL`` to use your own Redis
instead of the embedded one, ``MONGO_URI`` to store items in MongoDB,
``DEMO_SPIDER=site`` for the generic spider, ``DEMO_NODES=N`` for more nodes,
``DEMO_DIR`` for where logs and items go (default ``data/demo``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import redis

from extensions.frontier.frontier import Frontier
from extensions.frontier.upkeep import Upkeep
from extensions.keys import SpiderKeys
from servers import services
from servers.clients import redis_at

WORK = Path(os.environ.get("DEMO_DIR") or services.ROOT / "data" / "demo").resolve()
TIMEOUT = 600  # seconds before the demo gives up waiting for the crawl


def main() -> int:
    spider = os.environ.get("DEMO_SPIDER", "shop")
    node_count = int(os.environ.get("DEMO_NODES", "2"))
    started: list[services.Service] = []
    nodes: list[subprocess.Popen] = []
    try:
        redis_url, site = services.demo_servers(WORK, started)

        keys = SpiderKeys.for_spider(spider)
        server = redis_at(redis_url)
        frontier = Frontier(server, keys, "demo")
        _forget_previous_demo(server, keys, frontier)

        # seeded before the nodes start: a node that opens to an empty crawl closes
        # after MAX_IDLE_TIME_BEFORE_CLOSE, and the seed command takes seconds to start
        seed = subprocess.run(
            [sys.executable, "-m", "scrapy", "seed", spider, site.url + "/",
             "-s", f"REDIS_URL={redis_url}"],
            cwd=services.ROOT, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        print(f"Seed       {seed.stdout.strip() or seed.stderr.strip()}")

        run_id = time.strftime("%H%M%S")
        items_dir = WORK / "items"
        settings = {"MAX_IDLE_TIME_BEFORE_CLOSE": 3, "ITEMS_DIR": items_dir, "LOG_LEVEL": "INFO"}
        node_ids = [f"node-{n}-{run_id}" for n in range(1, node_count + 1)]
        began = time.monotonic()
        for node_id in node_ids:
            log = WORK / f"{node_id}.log"
            nodes.append(
                services.start_node(
                    spider, redis_url, log=log, settings={**settings, "NODE_ID": node_id}
                )
            )
            print(f"Node       {node_id} (log: {_shown(log)})")

        _wait_for_nodes(nodes, server, keys, frontier, node_ids, began)
        duration = time.monotonic() - began
        _summary(server, keys, node_ids, duration, items_dir / spider)
        failed = [n for n in nodes if n.returncode != 0]
        return 1 if failed else 0
    except KeyboardInterrupt:
        print("\nInterrupted: stopping the nodes (they hand back their work) ...")
        return 130
    finally:
        services.stop_all(nodes, started)


def _forget_previous_demo(server: redis.Redis, keys: SpiderKeys, frontier: Frontier) -> None:
    """A demo against a reused Redis starts from scratch."""
    Upkeep(frontier).clear()
    server.delete(keys.dlq, keys.start_urls)


def _wait_for_nodes(nodes, server, keys, frontier, node_ids, began) -> None:
    deadline = time.monotonic() + TIMEOUT
    tty = sys.stdout.isatty()
    while any(n.poll() is None for n in nodes):
        if time.monotonic() > deadline:
            raise SystemExit(f"the crawl did not finish within {TIMEOUT}s; see the node logs")
        pages = sum(_node_value(server, keys, n, "pages") for n in node_ids)
        sizes = frontier.sizes()
        line = (
            f"  {time.monotonic() - began:5.1f}s  pages {pages:6d}  queued {sizes.queued:6d}  "
            f"in flight {sizes.in_flight:4d}  seen {sizes.seen:6d}"
        )
        # One line rewritten in place on a terminal, a line per second in a log.
        print(f"\r{line}" if tty else line, end="" if tty else "\n", flush=True)
        time.sleep(1)
    if tty:
        print()


def _shown(path: Path) -> Path:
    """``path`` relative to the project when it is inside it."""
    return path.relative_to(services.ROOT) if path.is_relative_to(services.ROOT) else path


def _node_value(server: redis.Redis, keys: SpiderKeys, node_id: str, field: str) -> int:
    value = server.hget(keys.node(node_id), field)
    return int(value or 0)


def _summary(server, keys, node_ids, duration, items_path: Path) -> None:
    print("\nWhat happened")
    total_pages = total_items = 0
    for node_id in node_ids:
        pages = _node_value(server, keys, node_id, "pages")
        items = _node_value(server, keys, node_id, "items")
        total_pages += pages
        total_items += items
        print(f"  {node_id:22s} pages {pages:6d}   items {items:6d}")
    print(f"  {'all nodes':22s} pages {total_pages:6d}   items {total_items:6d}")
    print(
        f"  duration {duration:.1f}s, {total_pages / duration:.0f} pages/s overall "
        "(start-up and the 3 s idle wait before closing included)"
    )
    dead = server.llen(keys.dlq)
    print(
        f"  dead-lettered: {dead}" + (f" (see `redis-cli LRANGE {keys.dlq} 0 -1`)" if dead else "")
    )
    if os.environ.get("MONGO_URI"):
        print(f"  items are in MongoDB, collection {keys.name}")
        return
    urls: list[str] = []
    for path in (items_path / f"{node_id}.jsonl" for node_id in node_ids):
        if not path.exists():
            continue
        with path.open(encoding="utf-8") as lines:
            urls.extend(json.loads(line)["url"] for line in lines)
    print(
        f"  items are in {_shown(items_path)}/NODE.jsonl: "
        f"{len(urls)} lines, {len(set(urls))} distinct URLs"
    )


if __name__ == "__main__":
    sys.exit(main())
