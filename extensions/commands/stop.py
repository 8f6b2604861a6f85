"""``scrapy stop NAME --crawl ID``: end one crawl. Nothing of it is leased again,
its queued requests are removed (counted), what is in flight finishes; its done
records, items and dead letters stay."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.exceptions import UsageError

from extensions.cli import ProjectCommand
from extensions.commands.crawls import CrawlsOf
from extensions.commands.pause import add_crawl_option

if TYPE_CHECKING:
    import argparse


class Command(CrawlsOf, ProjectCommand):
    def syntax(self) -> str:
        return "NAME --crawl ID"

    def short_desc(self) -> str:
        return "Stop one crawl of a spider: its queued requests are removed"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        add_crawl_option(parser, required=True)

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1:
            raise UsageError("name one spider: scrapy stop NAME --crawl ID")
        crawls = self.spider_crawls(args[0])
        self.crawl_or_exit(crawls, opts.crawl)
        state = crawls.state(opts.crawl)
        if state in ("stopped", "expired"):
            removed = crawls.drain(opts.crawl)  # what an interrupted stop left
            more = f"; {removed} more queued requests removed" if removed else ""
            print(f"crawl {opts.crawl} of {args[0]} was {state} already{more}")
            return
        removed = crawls.stop(opts.crawl)
        print(f"stopped crawl {opts.crawl} of {args[0]}: {removed} queued requests removed")
