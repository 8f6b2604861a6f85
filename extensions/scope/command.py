"""``scrapy scope NAME [--crawl ID]``: show a crawl's scope, or change it for
the cluster at once (``--exclude RX``, ``--include RX``, ``--set FIELD=VALUE``,
``--clear``)."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

from scrapy.exceptions import UsageError

from extensions import sharding
from extensions.cli import ProjectCommand, redis_for_command, spider_keys
from extensions.crawlid import crawl_id_problem
from extensions.scope.changes import Change, apply, overflow_for
from extensions.scope.document import ScopeError
from extensions.scope.store import ScopeStore

if TYPE_CHECKING:
    import argparse

    from extensions.scope.sweep import Swept

PROGRESS_EVERY = 100_000  # queued requests looked at between two progress lines


class ScopeCommand(ProjectCommand):
    def syntax(self) -> str:
        return "NAME [--crawl ID] [--include RX] [--exclude RX] [--set FIELD=VALUE] [--clear]"

    def short_desc(self) -> str:
        return "Show a crawl's scope, or change it for every node at once"

    def long_desc(self) -> str:
        return (
            "Without a change, print the scope of crawl ID (or of the crawl without an "
            "id) as JSON, with what the nodes fetched and refused by it. --include and "
            "--exclude add a regular expression (matched anywhere in the URL; exclude "
            "wins); --set FIELD=VALUE sets a field (null leaves it out); --clear removes "
            "the scope. A change that does not hold is refused, naming the field, and "
            "nothing changes. Every node judges its next leased request by the new scope, "
            "and the queued requests it refuses are removed now, from Redis and from the "
            "MongoDB overflow (--keep-queued: as the nodes lease them), counted in the "
            "crawl's figures."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--crawl", metavar="ID", default="",
                            help="the crawl (scrapy seed --crawl ID)")  # fmt: skip
        parser.add_argument("--include", metavar="RX", action="append", default=[],
                            help="also take in URLs this regular expression finds")  # fmt: skip
        parser.add_argument("--exclude", metavar="RX", action="append", default=[],
                            help="refuse URLs this regular expression finds")  # fmt: skip
        parser.add_argument("--set", metavar="FIELD=VALUE", action="append", default=[],
                            dest="sets", help="set one field of the scope")  # fmt: skip
        parser.add_argument("--clear", action="store_true", help="remove the crawl's scope")
        parser.add_argument(
            "--keep-queued", action="store_true", dest="keep_queued",
            help="leave queued requests to be judged as they are leased",
        )  # fmt: skip

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1:
            raise UsageError("name one spider: scrapy scope NAME [--crawl ID] ...")
        if opts.crawl:
            problem = crawl_id_problem(opts.crawl)
            if problem:
                raise SystemExit(f"error: --crawl: {problem}")
        assert self.settings is not None
        keys = spider_keys(self.settings, args[0])
        server = redis_for_command(self.settings)
        keys = sharding.as_recorded(server, keys)
        change = Change(opts.crawl, opts.include, opts.exclude, opts.sets, clear=opts.clear)
        if change.empty:
            _show(ScopeStore(server, keys), opts.crawl)
            return
        which = f"crawl {opts.crawl}" if opts.crawl else "the crawl without an id"
        overflow = None if opts.keep_queued else overflow_for(self.settings, server, keys)
        try:
            scope, swept = apply(server, keys, change, sweep=not opts.keep_queued,
                                 overflow=overflow, progress=_Progress())  # fmt: skip
        except ScopeError as exc:
            raise SystemExit(f"error: {exc}") from None
        finally:
            if overflow is not None:
                overflow.store.close()
        if scope is None:
            print(f"scope of {which} of {args[0]} removed")
            return
        print(f"scope of {which} of {args[0]}: {scope.to_json()}")
        if not opts.keep_queued:
            print(f"queued requests looked at: {swept.looked}, removed: {swept.removed}")


def _show(store: ScopeStore, crawl: str) -> None:
    try:
        current = store.crawl_scope(crawl)
        shown = None if current is None else current.as_dict()
    except ScopeError as exc:
        shown = {"unreadable": str(exc)}
    print(json.dumps({"crawl": crawl, "scope": shown, "counts": store.counts(crawl)},
                     indent=2, sort_keys=True))  # fmt: skip


class _Progress:
    """A line on standard error every PROGRESS_EVERY queued requests looked at."""

    def __init__(self) -> None:
        self.said = 0

    def __call__(self, swept: Swept) -> None:
        if swept.looked - self.said >= PROGRESS_EVERY:
            self.said = swept.looked
            print(f"{swept.looked} queued requests looked at, {swept.removed} removed",
                  file=sys.stderr, flush=True)  # fmt: skip
