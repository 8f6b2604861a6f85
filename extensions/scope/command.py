"""``scrapy scope NAME [--crawl ID]``: show a crawl's scope, or change it for
the cluster at once (``--exclude RX``, ``--include RX``, ``--set FIELD=VALUE``,
``--clear``)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from scrapy.exceptions import UsageError

from extensions import sharding
from extensions.cli import ProjectCommand, redis_for_command, spider_keys
from extensions.crawlid import crawl_id_problem
from extensions.scope.document import EMPTY, Scope, ScopeError, parse_value
from extensions.scope.store import ScopeStore

if TYPE_CHECKING:
    import argparse


def changed(scope: Scope, include: list[str], exclude: list[str], sets: list[str]) -> Scope:
    """``scope`` with the changes a command line asks for; ScopeError naming
    the field that cannot take its value (nothing is changed then)."""
    scope = scope.with_patterns(include, exclude)
    for assignment in sets:
        name, equals, value = assignment.partition("=")
        if not equals:
            raise ScopeError(f"{name}: --set takes FIELD=VALUE")
        scope = scope.with_field(name.strip(), parse_value(name.strip(), value))
    return scope


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
            "nothing changes. Every node judges its next leased request by the new scope: "
            "queued requests it refuses are dropped, not fetched, and counted."
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
        store = ScopeStore(server, sharding.as_recorded(server, keys))
        which = f"crawl {opts.crawl}" if opts.crawl else "the crawl without an id"
        try:
            current = store.crawl_scope(opts.crawl)
        except ScopeError as exc:
            print(f"warning: the stored scope cannot be read ({exc}): starting afresh")
            current = None
        if opts.clear:
            store.set_crawl_scope(opts.crawl, None)
            print(f"scope of {which} of {args[0]} removed")
            return
        if not (opts.include or opts.exclude or opts.sets):
            shown = {
                "crawl": opts.crawl,
                "scope": None if current is None else current.as_dict(),
                "counts": store.counts(opts.crawl),
            }
            print(json.dumps(shown, indent=2, sort_keys=True))
            return
        try:
            scope = changed(current or EMPTY, opts.include, opts.exclude, opts.sets)
        except ScopeError as exc:
            raise SystemExit(f"error: {exc}") from None
        store.set_crawl_scope(opts.crawl, scope)
        print(f"scope of {which} of {args[0]}: {scope.to_json()}")
