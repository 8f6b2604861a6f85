"""``scrapy pause NAME [--crawl ID]``: no node leases the crawl's requests from
its next lease on (every crawl's, without --crawl); what is in flight finishes.
The pause is kept in Redis: it outlives node restarts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.exceptions import UsageError

from extensions.cli import ProjectCommand
from extensions.commands.crawls import CrawlsOf

if TYPE_CHECKING:
    import argparse


def add_crawl_option(parser: argparse.ArgumentParser, required: bool = False) -> None:
    parser.add_argument(
        "--crawl", metavar="ID", default=None, required=required,
        help="the crawl (scrapy seed --crawl ID)" + ("" if required else "; default: every crawl"),
    )  # fmt: skip


class Command(CrawlsOf, ProjectCommand):
    #: what the command does to the crawl, and how it says so
    verb = "pause"
    done = "paused"

    def syntax(self) -> str:
        return "NAME [--crawl ID]"

    def short_desc(self) -> str:
        return "Pause a crawl (or every crawl) of a spider; scrapy resume carries on"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        add_crawl_option(parser)

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1:
            raise UsageError(f"name one spider: scrapy {self.verb} NAME [--crawl ID]")
        crawls = self.spider_crawls(args[0])
        if opts.crawl is not None:
            self.crawl_or_exit(crawls, opts.crawl)
        before = getattr(crawls, self.verb)(opts.crawl)
        what = f"crawl {opts.crawl}" if opts.crawl is not None else "every crawl"
        if before in ("stopped", "expired"):
            raise SystemExit(f"error: {what} of {args[0]} is {before}: it cannot be {self.done}")
        print(f"{self.done} {what} of {args[0]}")
