"""``scrapy recrawl NAME [--older-than 7d] [--match REGEX] [--limit N]``: queue
pages kept for a recrawl now, instead of at their date."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from scrapy.exceptions import UsageError

from extensions import clock, compat, installed, sharding
from extensions.cli import ProjectCommand, redis_for_command, spider_keys
from extensions.frontier.frontier import Frontier
from extensions.recrawl.redisstore import RecrawlStore
from extensions.recrawl.statusstore import MongoStatusStore, store_kind

if TYPE_CHECKING:
    import argparse

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
FEED_ROUNDS = 10_000  # bounds the feeding loop: at most rounds x batch x shards pages


def parse_age(text: str) -> float:
    """``90``, ``45s``, ``30m``, ``12h``, ``7d``, ``2w`` as seconds."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", text)
    if not match:
        raise UsageError(f"--older-than {text!r}: expected a number with s, m, h, d or w")
    return float(match[1]) * UNITS[match[2] or "s"]


class Command(ProjectCommand):
    def syntax(self) -> str:
        return "NAME [--older-than AGE] [--match REGEX] [--limit N]"

    def short_desc(self) -> str:
        return "Queue pages kept for a recrawl now, instead of at their date"

    def long_desc(self) -> str:
        return (
            "Every page the crawl keeps for a recrawl (RECRAWL_AFTER, RECRAWL_RULES, "
            "recrawl_after) whose URL matches --match (a regular expression, searched) "
            "and whose last fetch is older than --older-than (90, 45s, 30m, 12h, 7d, 2w) "
            "is made due now and queued, at most --limit pages. Pages already queued or "
            "in flight are left as they are, so none is queued twice. Reads every kept "
            "record: at a hundred million pages, expect minutes."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--older-than", metavar="AGE",
                            help="only pages last fetched longer ago than AGE")  # fmt: skip
        parser.add_argument("--match", metavar="REGEX", help="only URLs this matches")
        parser.add_argument("--limit", type=int, metavar="N", help="at most N pages")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1:
            raise UsageError("name one spider: scrapy recrawl NAME [--older-than AGE] ...")
        if opts.limit is not None and opts.limit < 1:
            raise UsageError("--limit must be a positive number")
        age = parse_age(opts.older_than) if opts.older_than else None
        try:
            pattern = re.compile(opts.match) if opts.match else None
        except re.error as exc:
            raise UsageError(f"--match {opts.match!r} is not a regular expression: {exc}") from exc
        assert self.settings is not None
        server = redis_for_command(self.settings)
        keys = sharding.as_recorded(server, spider_keys(self.settings, args[0]))
        foreign = compat.foreign_state(server, keys)
        if foreign:
            raise SystemExit("error: " + "\n       ".join(foreign))
        cutoff = clock.now() - age if age is not None else None

        def wanted(url: str, fetched_at: float | None) -> bool:
            if pattern is not None and not pattern.search(url):
                return False
            return cutoff is None or fetched_at is None or fetched_at < cutoff

        frontier = RecrawlStore(Frontier(server, keys, "recrawl", budget=0))
        settings = installed.effective(self.settings)
        batch = settings.getint("RECRAWL_FEED_BATCH")
        unreadable = 0
        if store_kind(settings) == "mongo":
            store = MongoStatusStore.from_settings(settings, keys.name, "recrawl")
            chosen = store.make_due(pattern, cutoff, opts.limit)
            hold = settings.getfloat("RECRAWL_CLAIM_TIMEOUT")

            def feed() -> int:
                return store.feed(frontier, batch, hold)
        else:
            chosen, unreadable = frontier.recrawl_now(wanted, opts.limit)

            def feed() -> int:
                return frontier.feed_due(batch, in_turn=False)

        queued = 0
        for _ in range(FEED_ROUNDS):
            fed = feed()
            queued += fed
            if not fed:
                break
        print(f"{chosen} pages of {args[0]} made due now; {queued} due pages queued")
        if unreadable:
            print(f"skipped {unreadable} unreadable revisit records (not a request's JSON)")
