"""``scrapy migrate NAME [--dry-run]``: carry a scrapy-redis crawl in progress over."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from scrapy.exceptions import UsageError
from scrapy.spiderloader import get_spider_loader

from extensions import compat, connection, installed
from extensions.cli import ProjectCommand, redis_for_command, spider_keys
from extensions.exceptions import ConfigError
from extensions.frontier.bloom import bloom_from_settings
from extensions.migrate import Migration, lifo_queue_class, spider_stub

if TYPE_CHECKING:
    import argparse

PICKLE_WARNING = (
    "warning: scrapy-redis stores requests as pickle. They are read here as plain data "
    "(no class but dates, decimals, sets, ordered dicts and lxml strings is ever loaded, "
    "so nothing in them runs), but migrate only a Redis you trust: what it holds becomes "
    "requests of your crawl."
)


class Command(ProjectCommand):
    def syntax(self) -> str:
        return "NAME [--dry-run]"

    def short_desc(self) -> str:
        return "Carry a scrapy-redis crawl in progress over: its queue and its dupefilter"

    def long_desc(self) -> str:
        return (
            "Converts the state scrapy-redis left in Redis for spider NAME: its pickled "
            "queue (NAME:requests) becomes JSON requests of this crawler, and the "
            "fingerprints of its dupefilter (NAME:dupefilter) are kept, so URLs the old crawl "
            "saw are not crawled again (the crawl then uses scrapy-redis's request "
            "fingerprint). Entries that cannot be converted go to the dead-letter list with "
            "the reason. A FIFO or LIFO list (SCHEDULER_QUEUE_CLASS says which) is queued in "
            "the order scrapy-redis would have popped it. Stop the scrapy-redis nodes first. "
            "Each key is moved to "
            "NAME:migrating:* before conversion and deleted only when converted; run the "
            "command again to finish an interrupted migration."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument(
            "--dry-run", action="store_true", help="say what would be converted, change nothing"
        )

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1:
            raise UsageError("name the spider: scrapy migrate NAME")
        assert self.settings is not None
        keys = spider_keys(self.settings, args[0])
        spidercls = get_spider_loader(self.settings).load(args[0])
        settings = installed.effective(self.settings)
        server = redis_for_command(self.settings)
        migration = Migration(
            server,
            keys,
            spider_stub(spidercls),
            bloom_from_settings(settings),
            queue_by=settings.get("FRONTIER_QUEUE_BY"),
            lifo=lifo_queue_class(self.settings.get("SCHEDULER_QUEUE_CLASS", "")),
        )
        plan = migration.plan()
        if not plan:
            print(f"nothing of scrapy-redis to carry over for {args[0]}")
        for line in plan:
            print(("would " if opts.dry_run else "") + line)
        start_type = connection.text(server.type(keys.start_urls))
        start_problem = compat.start_key_problem(start_type, keys)
        if start_problem:  # read as it is, once the settings say what it is
            print(f"note: {start_problem}")
        if opts.dry_run or not plan:
            return
        print(PICKLE_WARNING, file=sys.stderr)
        try:
            report = migration.run(progress=lambda line: print(line, file=sys.stderr))
        except ConfigError as exc:
            print(f"error: {exc}", file=sys.stderr)
            self.exitcode = 1
            return
        print(
            f"converted {report.requests} requests into {keys.requests}, "
            f"kept {report.fingerprints} fingerprints of scrapy-redis's dupefilter"
        )
        if report.dead_lettered:
            print(f"{report.dead_lettered} queue entries could not be converted: they are in "
                  f"{keys.dlq} with the reason (scrapy dlq {args[0]} list)")  # fmt: skip
            self.exitcode = 1
