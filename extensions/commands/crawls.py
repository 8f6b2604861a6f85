"""``scrapy crawls NAME [--json]``: every crawl of spider NAME, with its state
and figures (the crawl without an id first, when it has anything)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import UsageError

from extensions import sharding
from extensions.cli import ProjectCommand, redis_for_command, spider_keys
from extensions.frontier.crawls.state import CrawlFigures, Crawls, UnknownCrawl, stamp
from extensions.observability.status import all_figures

if TYPE_CHECKING:
    import argparse

    from extensions.keys import SpiderKeys

#: the name the crawl without an id is shown under
WITHOUT_ID = "(no id)"


class CrawlsOf:
    """What a command on the crawls of one spider needs (a mixin: Scrapy takes
    every command class of a commands module for a command)."""

    settings: Any

    def spider_crawls(self, name: str) -> Crawls:
        assert self.settings is not None
        keys: SpiderKeys = spider_keys(self.settings, name)
        server = redis_for_command(self.settings)
        return Crawls(server, sharding.as_recorded(server, keys))

    def crawl_or_exit(self, crawls: Crawls, crawl: str) -> None:
        if crawls.state(crawl) is None:
            known = ", ".join(crawls.ids()) or "none"
            raise SystemExit(f"error: no crawl {crawl!r} of {crawls.keys.name} (crawls: {known})")


def render(rows: list[CrawlFigures]) -> str:
    lines = [
        f"{'crawl':20s} {'state':9s} {'queued':>8s} {'flight':>6s} {'delayed':>7s} "
        f"{'done':>8s} {'items':>8s} {'dlq':>5s} {'weight':>6s}  {'started':19s}  last activity"
    ]
    for row in rows:
        lines.append(
            f"{(row.crawl or WITHOUT_ID)[:20]:20s} {row.shown_state:9s} {row.queued:8d} "
            f"{row.in_flight:6d} {row.delayed:7d} {row.done:8d} {row.items:8d} {row.dlq:5d} "
            f"{row.weight:6g}  {stamp(row.started):19s}  {stamp(row.updated)}"
        )
    return "\n".join(lines)


def render_one(row: CrawlFigures) -> str:
    lines = [f"crawl {row.crawl or WITHOUT_ID}: {row.shown_state}"]
    lines.append(
        f"queued {row.queued}   in flight {row.in_flight}   delayed {row.delayed}   "
        f"done {row.done}   items {row.items}   dead-lettered {row.dlq}"
    )
    extra = f"weight {row.weight:g}   budget {row.budget or '-'}"
    if row.removed or row.dropped:
        extra += f"   removed {row.removed}   dropped over budget {row.dropped}"
    lines.append(extra)
    lines.append(
        f"started {stamp(row.started)}   last activity {stamp(row.updated)}"
        + (f"   expires {stamp(row.expires)}" if row.expires else "")
    )
    return "\n".join(lines)


class Command(CrawlsOf, ProjectCommand):
    def syntax(self) -> str:
        return "NAME [--json]"

    def short_desc(self) -> str:
        return "List a spider's crawls with their state and figures"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--json", action="store_true", help="print one JSON object")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1:
            raise UsageError("name one spider: scrapy crawls NAME [--json]")
        crawls = self.spider_crawls(args[0])
        try:
            rows = all_figures(crawls)
        except UnknownCrawl as exc:  # stopped and forgotten between two reads
            raise SystemExit(f"error: {exc}") from None
        if opts.json:
            payload: dict[str, Any] = {"spider": args[0], "crawls": [r.as_dict() for r in rows]}
            print(json.dumps(payload))
        else:
            print(render(rows))
