"""``scrapy dlq NAME list|replay|purge``: inspect and act on the dead letters."""

from __future__ import annotations

import json
import sys
import time
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import UsageError

from extensions import installed, sharding
from extensions.cli import ProjectCommand, redis_for_command, spider_keys
from extensions.frontier.deadletter import DeadLetters
from extensions.frontier.frontier import Frontier

if TYPE_CHECKING:
    import argparse

ACTIONS = ("list", "replay", "purge")


class Command(ProjectCommand):
    def syntax(self) -> str:
        return "NAME list [--json] [--limit N] | NAME replay [--limit N] | NAME purge"

    def short_desc(self) -> str:
        return "List, replay or purge the requests that failed for good"

    def long_desc(self) -> str:
        return (
            "list: newest first, one line each (with --json, one JSON object per line). "
            "replay: the oldest records that hold a request go back into the queue with "
            "fresh retries, and leave the dead-letter list. purge: delete them all."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--json", action="store_true", help="list as JSON Lines")
        parser.add_argument("--limit", type=int, metavar="N", help="at most N records")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 2 or args[1] not in ACTIONS:
            raise UsageError(f"expected: scrapy dlq NAME {{{'|'.join(ACTIONS)}}}")
        if opts.limit is not None and opts.limit < 1:
            raise UsageError("--limit must be a positive number")
        assert self.settings is not None
        keys = spider_keys(self.settings, args[0])
        letters = DeadLetters(redis_for_command(self.settings), keys.dlq, node_id="")
        action = args[1]
        if action == "list":
            records, malformed = letters.records(opts.limit)
            for record in records:
                print(json.dumps(record) if opts.json else _line(record))
            if not records and not malformed and not opts.json:
                print(
                    f"no dead letters in {keys.dlq}: nothing has failed for good (a request "
                    "is dead-lettered once its retries are spent)",
                    file=sys.stderr,
                )
            if malformed:
                print(f"skipped {malformed} malformed records (not JSON objects)", file=sys.stderr)
        elif action == "replay":
            server = letters.server
            settings = installed.effective(self.settings)
            frontier = Frontier(
                server,
                sharding.as_recorded(server, keys),  # into the shards the crawl has
                "dlq",
                budget=0,  # a replay is not held to the budget it met
            )
            queue_by = settings.get("FRONTIER_QUEUE_BY")
            replayed, left = letters.replay(frontier, queue_by, opts.limit)
            print(f"replayed {replayed} requests into the queue of {args[0]}")
            if left:
                print(f"{left} records hold no valid request (bad start URLs, unreadable or "
                      "malformed entries) and stay; fix and seed them again, or purge")  # fmt: skip
        else:
            print(f"purged {letters.purge()} records from {keys.dlq}")


def _line(record: dict[str, Any]) -> str:
    stamp = record.get("time")
    when_s = stamp if isinstance(stamp, (int, float)) and 0 <= stamp < 1e11 else 0
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(when_s))
    retries = f" after {record['retry_times']} retries" if record.get("retry_times") else ""
    kind = str(record.get("kind", "?"))[:40]
    url, error = str(record.get("url", ""))[:2000], str(record.get("error"))[:2000]
    return f"{when}  {kind:17s} {url}  {error}{retries}"
