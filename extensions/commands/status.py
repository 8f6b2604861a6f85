"""``scrapy status NAME [--json]``: the crawl's frontier and every node."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any, ClassVar

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from extensions import defaults
from extensions.commands import redis_for_command, spider_keys
from extensions.frontier import Frontier

if TYPE_CHECKING:
    import argparse

    import redis

    from extensions.keys import SpiderKeys


def crawl_status(server: redis.Redis, keys: SpiderKeys, node_timeout: float) -> dict[str, Any]:
    sizes = Frontier(server, keys, node_id="").sizes()
    now = time.time()
    nodes = []
    for raw_id, beat_ms in server.zrange(keys.nodes, 0, -1, withscores=True):
        node_id = raw_id.decode()
        record = {k.decode(): v.decode() for k, v in server.hgetall(keys.node(node_id)).items()}
        last_beat = beat_ms / 1000
        state = record.get("state", "running")
        alive = state != "closed" and now - last_beat <= node_timeout
        nodes.append(
            {
                "node": node_id,
                "state": state if state == "closed" else ("alive" if alive else "dead"),
                "alive": alive,
                "last_heartbeat": last_beat,
                "seconds_since_heartbeat": round(now - last_beat, 1),
                "pages": int(record.get("pages", 0)),
                "items": int(record.get("items", 0)),
                "in_flight": server.zcard(keys.leases(node_id)),
                "host": record.get("host", ""),
                "pid": int(record.get("pid", 0) or 0),
            }
        )
    checkpoint = {k.decode(): float(v) for k, v in server.hgetall(keys.checkpoint).items()}
    return {
        "spider": keys.name,
        "pages": int(checkpoint.get("pages", 0)),
        "items": int(checkpoint.get("items", 0)),
        "started": checkpoint.get("started"),
        "updated": checkpoint.get("updated"),
        "start_urls": sizes.start_urls,
        "queued": sizes.queued,
        "in_flight": sizes.in_flight,
        "delayed": sizes.delayed,
        "seen": sizes.seen,
        "dlq": sizes.dlq,
        "nodes": nodes,
    }


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "NAME [--json]"

    def short_desc(self) -> str:
        return "Show a distributed crawl's frontier and nodes"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--json", action="store_true", help="print one JSON object")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1:
            raise UsageError("name one spider: scrapy status NAME [--json]")
        assert self.settings is not None
        keys = spider_keys(self.settings, args[0])
        server = redis_for_command(self.settings)
        status = crawl_status(
            server, keys, self.settings.getfloat("NODE_TIMEOUT", defaults.NODE_TIMEOUT)
        )
        if opts.json:
            print(json.dumps(status))
            return
        print(
            f"{status['spider']}: {status['pages']} pages done, {status['items']} items stored; "
            f"{status['seen']} seen, {status['queued']} queued, {status['in_flight']} in flight, "
            f"{status['delayed']} delayed, {status['start_urls']} start URLs waiting, "
            f"{status['dlq']} dead-lettered"
        )
        if not status["nodes"]:
            print("no nodes have joined this crawl")
            return
        print(f"{'node':32s} {'state':7s} {'heartbeat':>10s} {'pages':>7s} {'items':>7s} leased")
        for node in status["nodes"]:
            print(
                f"{node['node']:32s} {node['state']:7s} "
                f"{node['seconds_since_heartbeat']:>8.1f}s {node['pages']:7d} "
                f"{node['items']:7d} {node['in_flight']:6d}"
            )
