"""``scrapy reparse NAME [--crawl ID] [--since DATE] [-a NAME=VALUE] [--follow] [--documents]``:
the spider's callbacks on its archived responses, the items stored as a crawl
stores them, no request sent (``extensions/warc/replay.py``)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from scrapy.commands import BaseRunSpiderCommand
from scrapy.exceptions import UsageError

from extensions import addon, installed
from extensions.crawlid import crawl_id_problem
from extensions.exceptions import ConfigError
from extensions.warc.archive import parse_date
from extensions.warc.replay import ReplaySource, replayed_start, since_problem
from extensions.warc.storage import archive_for

if TYPE_CHECKING:
    import argparse
    from collections.abc import AsyncIterator

    from scrapy.settings import BaseSettings

REPLAY_HANDLER = "extensions.warc.replay.ReplayHandler"
REPLAY_BAN_CHECK = "extensions.warc.replay.ReplayBanCheck"
REPARSE_LINKS = "extensions.warc.replay.ReparseLinks"


class ReparseAddon:
    """After the distributed add-on: the same spider, item pipeline and spider
    middlewares, with Scrapy's own scheduler and downloader, the archive for
    every download handler, and none of the middlewares that talk to a site or
    to the frontier (robots.txt, politeness, pushback, proxies, WARC)."""

    def update_settings(self, settings: BaseSettings) -> None:
        for name, value in (
            ("SCHEDULER", "scrapy.core.scheduler.Scheduler"),
            ("DUPEFILTER_CLASS", "scrapy.dupefilters.BaseDupeFilter"),
            ("DOWNLOADER", "scrapy.core.downloader.Downloader"),
            ("WARC_ENABLED", False),
            ("ROBOTSTXT_OBEY", False),
            # nothing is sent: no wait per host, no limit on a host's pages at once
            ("DOWNLOAD_DELAY", 0),
            ("AUTOTHROTTLE_ENABLED", False),
            ("CONCURRENT_REQUESTS_PER_DOMAIN", settings.getint("CONCURRENT_REQUESTS")),
            ("CONCURRENT_REQUESTS_PER_IP", 0),
        ):
            settings.set(name, value, "cmdline")
        handlers = settings["DOWNLOAD_HANDLERS"]
        for scheme in {*settings["DOWNLOAD_HANDLERS_BASE"], *handlers, "http", "https"}:
            handlers[scheme] = REPLAY_HANDLER
        middlewares = settings["DOWNLOADER_MIDDLEWARES"]
        stack = addon.stack_middlewares("downloader")
        for path in [*stack, addon.ROBOTSTXT, addon.SCRAPY_ROBOTSTXT]:
            middlewares[path] = None
        middlewares[REPLAY_BAN_CHECK] = 585  # where the crawl's ban check is
        # without --follow, next to the spider: nothing else sees a link; with
        # it, after every filter of the crawl's (offsite, depth, traps, ...)
        order = 30 if settings.getbool("REPARSE_FOLLOW") else 1000
        settings["SPIDER_MIDDLEWARES"][REPARSE_LINKS] = order


def replaying(spidercls: type, source: ReplaySource) -> type:
    """``spidercls`` whose start is the archive, and which reads no start URLs."""

    async def start(self: Any) -> AsyncIterator[Any]:
        async for request in replayed_start(self, source):
            yield request

    attrs: dict[str, Any] = {"start": start, "__module__": spidercls.__module__}
    if hasattr(spidercls, "_read_start_urls"):
        attrs["_read_start_urls"] = lambda self: False
    return type(spidercls.__name__, (spidercls,), attrs)


class Command(BaseRunSpiderCommand):
    requires_project = True

    def syntax(self) -> str:
        return "NAME [--crawl ID] [--since DATE] [-a NAME=VALUE ...] [--follow] [--documents]"

    def short_desc(self) -> str:
        return "Run the spider's callbacks on its archived responses, sending no request"

    def long_desc(self) -> str:
        return (
            "Reads the spider's WARC files in WARC_DIR (a directory or s3://BUCKET/PREFIX; "
            "WARC_ENABLED wrote them) and runs "
            "each archived 2xx response through the callback its request had, with the "
            "item pipelines of a crawl: a fixed callback gives corrected items without "
            "fetching again. Links found are counted, not queued, unless --follow pushes "
            "them to the spider's start list. A file that cannot be read to its end (a "
            "node killed mid-write) is read up to its last whole record and reported."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--crawl", metavar="ID", help="only the pages of this crawl id")
        parser.add_argument(
            "--since", metavar="DATE", help="only pages fetched at or after DATE (ISO 8601, UTC)"
        )
        parser.add_argument(
            "--spider-arg", dest="spargs", action="append", default=[], metavar="NAME=VALUE",
            help="a spider argument (as -a)",
        )  # fmt: skip
        parser.add_argument(
            "--follow", action="store_true", help="push the links found to the start list"
        )
        parser.add_argument(
            "--documents", action="store_true",
            help="store each page as a document (DOCUMENTS_ENABLED), from the archive",
        )  # fmt: skip

    def process_options(self, args: list[str], opts: argparse.Namespace) -> None:
        super().process_options(args, opts)
        assert self.settings is not None
        addons = dict(self.settings.getdict("ADDONS"))
        addons[f"{__name__}.ReparseAddon"] = max([0, *addons.values()]) + 1
        self.settings.set("ADDONS", addons, "cmdline")
        self.settings.set("REPARSE_FOLLOW", bool(opts.follow), "cmdline")
        if opts.documents:
            self.settings.set("DOCUMENTS_ENABLED", True, "cmdline")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1:
            raise UsageError("expected: scrapy reparse NAME")
        assert self.settings is not None and self.crawler_process is not None
        for problem in (
            opts.since and since_problem(opts.since),
            opts.crawl is not None and crawl_id_problem(opts.crawl),
        ):
            if problem:
                raise UsageError(str(problem))
        try:
            archive = archive_for(installed.effective(self.settings))
        except ConfigError as exc:
            raise UsageError(str(exc)) from None
        try:
            spidercls = self.crawler_process.spider_loader.load(args[0])
        except KeyError:
            raise UsageError(f"Spider not found: {args[0]}") from None
        since = parse_date(opts.since) if opts.since else None
        source = ReplaySource(archive, spidercls.name, opts.crawl, since)
        if not source.files:
            print(f"no WARC files of {spidercls.name} in {archive}", file=sys.stderr)
            self.exitcode = 1
            return
        crawler = self.crawler_process.create_crawler(replaying(spidercls, source))
        self.crawler_process.crawl(crawler, **opts.spargs)
        try:
            self.crawler_process.start()
        finally:
            archive.close()
        stats = crawler.stats.get_stats() if crawler.stats else {}
        print(
            f"reparsed {stats.get('reparse/responses', 0)} responses of "
            f"{stats.get('reparse/archived', 0)} archived ({len(source.files)} files): "
            f"{stats.get('item_scraped_count', 0)} items, "
            f"{stats.get('reparse/links_followed', 0)} links pushed, "
            f"{stats.get('reparse/links_not_followed', 0)} not followed, "
            f"{len(source.damaged)} files cut short, "
            f"in {stats.get('elapsed_time_seconds', 0):.2f} s",
            file=sys.stderr,
        )
        for damage in source.damaged:
            print(f"{damage.path.name}: read up to byte {damage.offset}; the rest cannot be "
                  f"read ({damage.error})", file=sys.stderr)  # fmt: skip
        if getattr(self.crawler_process, "bootstrap_failed", False):
            self.exitcode = 1
