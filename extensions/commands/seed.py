"""``scrapy seed NAME URL... [-f FILE]``: validate start URLs and push them to Redis."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from scrapy.exceptions import UsageError
from scrapy.spiderloader import get_spider_loader

from extensions import sharding
from extensions.cli import ProjectCommand, redis_for_command, spider_keys
from extensions.crawlid import crawl_id_problem
from extensions.frontier.crawls.state import Crawls
from extensions.frontier.seeding import push, validate, with_field
from extensions.frontier.start_urls import EntryRules, reads_start_urls
from extensions.purpose.policy import NO_PURPOSE, purpose_problem
from extensions.scope.document import ScopeError
from extensions.scope.seeding import (
    entry_scope_problem,
    read_scope_file,
    store_crawl_scope,
    with_sitemaps,
)
from extensions.sitemaps import SitemapReading

if TYPE_CHECKING:
    import argparse


class Command(ProjectCommand):
    def syntax(self) -> str:
        return (
            "NAME [URL ...] [-f FILE] [--sitemap] [--again] [--crawl ID [--weight W] "
            "[--budget N] [--expire-after S] [--purpose P]] [--scope FILE]"
        )

    def short_desc(self) -> str:
        return "Validate start URLs and push them to the spider's Redis start list"

    def long_desc(self) -> str:
        return (
            "Push start URLs for spider NAME to NAME:start_urls, where every node of "
            "the crawl picks them up. Each URL (or scrapy-redis JSON entry) is checked "
            "first, as a node would check it (scheme, length, credentials, priority, "
            "meta keys): invalid ones are reported and skipped, the valid ones still go in, "
            "and the exit status is 1 if any was refused. -f reads one entry per line "
            "('-' for standard input); blank lines and lines starting with # are skipped. "
            "--crawl starts (or adds to) a crawl of its own: its own dupefilter, budget, "
            "figures, pause and stop (scrapy crawls, pause, resume, stop). With "
            'FRONTIER_OVERFLOW = "mongo" at most FRONTIER_START_URLS_MAX entries wait in '
            "Redis: the command pushes more as the nodes take them, and returns when all "
            "are in. A URL the crawl has already seen is not fetched again: --again "
            "fetches the given URLs anyway, and a new --crawl ID starts afresh. --scope "
            "FILE gives the crawl (--crawl ID, or the crawl without an id) a scope: a JSON "
            "document every node enforces (scrapy scope shows and changes it); an entry "
            'may carry a scope of its own, "meta": {"scope": {...}}, for every page that '
            "descends from it."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument(
            "-f", "--file", dest="files", action="append", default=[], metavar="FILE",
            help="read entries from FILE, one per line ('-' = standard input)",
        )  # fmt: skip
        parser.add_argument(
            "--sitemap", action="store_true",
            help="the URLs are sitemaps, sitemap indexes or robots.txt files to read page "
                 "URLs from (any DistributedSpider reads them)",
        )  # fmt: skip
        parser.add_argument(
            "--again", action="store_true",
            help="fetch these URLs even if the crawl has seen them (what they link to "
                 "that the crawl has seen is still not fetched again)",
        )  # fmt: skip
        parser.add_argument(
            "--crawl", metavar="ID", default="",
            help="the crawl the entries start or join: letters, digits, '-', '_', '.'",
        )  # fmt: skip
        parser.add_argument(
            "--weight", type=float, default=None, metavar="W",
            help="with --crawl: its share of leasing against the other crawls (default 1)",
        )  # fmt: skip
        parser.add_argument(
            "--budget", type=int, default=None, metavar="N",
            help="with --crawl: requests it may be given at most (default CRAWL_PAGE_BUDGET)",
        )  # fmt: skip
        parser.add_argument(
            "--purpose", default=None, metavar="P",
            help="with --crawl: what it gathers for (search, ai-input, ai-train; none = "
                 "record preferences only), over CRAWL_PURPOSE: the items of pages whose "
                 "sites refuse it are dropped or flagged (USAGE_ENFORCE)",
        )  # fmt: skip
        parser.add_argument(
            "--expire-after", type=float, default=0.0, metavar="SECONDS", dest="expire_after",
            help="with --crawl: it stops itself this long after now",
        )  # fmt: skip
        parser.add_argument(
            "--scope", metavar="FILE", default=None,
            help="a scope document (JSON) for the crawl: scope, include, exclude, "
                 "max_depth, extra_hops, sitemaps, max_pages, max_bytes, max_seconds, "
                 "max_pages_per_host",
        )  # fmt: skip
        parser.add_argument(
            "--score", type=float, default=0.0,
            help="with REDIS_START_URLS_AS_ZSET: the entries' score (highest read first)",
        )  # fmt: skip

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if not args:
            raise UsageError("name the spider: scrapy seed NAME URL ... [-f FILE]")
        name, entries = args[0], list(args[1:])
        for path in opts.files:
            entries.extend(_read_entries(path))
        if not entries:
            raise UsageError("no URLs given: pass them as arguments or with -f FILE")
        assert self.settings is not None
        crawl = opts.crawl
        try:
            scope = read_scope_file(opts.scope) if opts.scope else None
        except ScopeError as exc:
            raise SystemExit(f"error: --scope {opts.scope}: {exc}") from None
        if crawl:
            problem = crawl_id_problem(crawl)
            if problem:
                raise SystemExit(f"error: --crawl: {problem}")
            if (opts.weight or 1) <= 0 or (opts.budget or 0) < 0 or opts.expire_after < 0:
                raise SystemExit("error: --weight must be positive, --budget and "
                                 "--expire-after not negative")  # fmt: skip
            if opts.purpose not in (None, NO_PURPOSE) and purpose_problem(opts.purpose):
                raise SystemExit(f"error: --purpose: {purpose_problem(opts.purpose)}")
            entries = [with_field(entry, "crawl", crawl, keep=True) for entry in entries]
        elif (opts.budget is not None or opts.expire_after or opts.weight is not None
              or opts.purpose is not None):  # fmt: skip
            raise UsageError("--weight, --budget, --expire-after and --purpose go with --crawl ID")
        if opts.again:
            entries = [with_field(entry, "dont_filter", True) for entry in entries]
        keys = spider_keys(self.settings, name)
        spidercls = get_spider_loader(self.settings).load(name)
        if not reads_start_urls(spidercls):
            raise UsageError(
                f"spider {name!r} does not read start URLs from Redis (make it a "
                "DistributedSpider or DistributedCrawlSpider): nothing would take them"
            )
        if opts.sitemap:
            if not issubclass(spidercls, SitemapReading):  # scrapy-redis's spider classes
                raise UsageError(
                    f"spider {name!r} does not read sitemaps (base it on DistributedSpider "
                    "or DistributedCrawlSpider): --sitemap entries would not be read as such"
                )
            entries = [with_field(entry, "sitemap", True) for entry in entries]

        if scope is not None and scope.sitemaps in ("include", "only"):
            if not issubclass(spidercls, SitemapReading):
                raise UsageError(f"spider {name!r} does not read sitemaps: the scope's "
                                 f"sitemaps {scope.sitemaps!r} cannot be met")  # fmt: skip
            entries = with_sitemaps(entries, scope, crawl)

        valid, refusals = validate(entries, EntryRules.from_settings(self.settings))
        refusals += [(e, p) for e in valid if (p := entry_scope_problem(e)) is not None]
        valid = [e for e in valid if entry_scope_problem(e) is None]
        for entry, reason in refusals:
            print(f"refused {entry!r:.200}: {reason}", file=sys.stderr)
        refused = len(refusals)

        server = redis_for_command(self.settings) if valid else None
        seen_before = False
        if server is not None and not crawl:
            seen_before = int(server.hget(keys.checkpoint, "seen") or 0) > 0
        if crawl and server is not None:
            crawls = Crawls(server, sharding.as_recorded(server, keys))
            state = crawls.state(crawl)
            seen_before = state is not None
            if state in ("stopped", "expired"):
                raise SystemExit(f"error: crawl {crawl} of {name} is {state}: start another id")
            budget = opts.budget
            if budget is None and state is None:
                budget = self.settings.getint("CRAWL_PAGE_BUDGET")
            crawls.register(crawl, weight=opts.weight, budget=budget,
                            expire_after=opts.expire_after)  # fmt: skip
            if opts.purpose is not None:
                server.hset(crawls.keys.crawl(crawl), "purpose", opts.purpose)
        if server is not None and scope is not None:
            store_crawl_scope(server, sharding.as_recorded(server, keys), crawl, scope)
        if server is not None:
            # with the overflow, the start list need not hold millions of entries
            # either: they go in as nodes take them (the command waits meanwhile)
            most = 0
            if self.settings.get("FRONTIER_OVERFLOW") == "mongo":
                most = self.settings.getint("FRONTIER_START_URLS_MAX")
            push(server, keys, valid, opts.score, most_waiting=most,
                 waiting_for_nodes=_waiting)  # fmt: skip
        into = f" (crawl {crawl})" if crawl else ""
        print(f"pushed {len(valid)} start URLs to {keys.start_urls}{into}", end="")
        print(f", refused {refused}" if refused else "")
        if seen_before and valid and not opts.again:
            _say_seen_before(name, crawl)
        if refused:
            self.exitcode = 1


def _say_seen_before(name: str, crawl: str) -> None:
    which = f"crawl {crawl!r} of {name}" if crawl else f"the crawl of {name} (no --crawl id)"
    again = f" --crawl {crawl}" if crawl else ""
    print(
        f"note: {which} has run before: a URL it has already seen is not fetched "
        f"again. To fetch these again: scrapy seed {name} URL...{again} --again; to "
        "start afresh: a new --crawl ID (scrapy crawls lists the ids in use)",
        file=sys.stderr,
    )


def _waiting(waiting: int, left: int) -> None:
    print(f"{waiting} start URLs wait for the nodes to take them; {left} more to push",
          file=sys.stderr, flush=True)  # fmt: skip


def _read_entries(path: str) -> list[str]:
    try:
        stream = sys.stdin if path == "-" else open(path, encoding="utf-8")  # noqa: SIM115
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    with stream:
        lines = [line.strip() for line in stream]
    return [line for line in lines if line and not line.startswith("#")]
