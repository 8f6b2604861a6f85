"""``scrapy hostrank NAME import FILE | top``: host ranks (``frontier/ranks/``)."""

from __future__ import annotations

import csv
import json
import math
import re
import sys
from typing import TYPE_CHECKING

from scrapy.exceptions import UsageError

from extensions import installed, sharding
from extensions.cli import ProjectCommand, redis_for_command, spider_keys
from extensions.frontier.groups import group_for
from extensions.frontier.ranks.state import HostRanks, RankBudget

if TYPE_CHECKING:
    import argparse
    from collections.abc import Iterable

HOST = re.compile(r"^[a-z0-9_.:-]{1,253}$")  # a host name, or an address as URLs have it


def read_ranks(lines: Iterable[str], positions: bool) -> tuple[dict[str, float], list[str]]:
    """host -> rank from ``host,rank`` lines, and what was wrong with each line
    skipped ("line N: ..."). With ``positions``, the second column is a place
    in a list (1 = the top, as Tranco's), turned into a rank that falls with it."""
    ranks: dict[str, float] = {}
    problems: list[str] = []
    for number, row in enumerate(csv.reader(lines), start=1):
        if not row or (len(row) == 1 and not row[0].strip()):
            continue
        if number == 1 and len(row) == 2 and row[1].strip().lower() in ("rank", "position"):
            continue  # a header
        if len(row) != 2:
            problems.append(f"line {number}: {len(row)} columns, not host,rank")
            continue
        host, raw = row[0].strip().lower().rstrip("."), row[1].strip()
        if not HOST.match(host):
            problems.append(f"line {number}: {row[0][:80]!r} is not a host name")
            continue
        try:
            rank = float(raw)
        except ValueError:
            rank = math.nan
        if not math.isfinite(rank) or rank < 0 or (positions and rank < 1):
            what = "a position (1 or more)" if positions else "a rank (a number, 0 or more)"
            problems.append(f"line {number}: {raw[:40]!r} is not {what}")
            continue
        ranks[host] = rank
    if positions and ranks:
        last = max(ranks.values())
        ranks = {host: last + 1 - place for host, place in ranks.items()}
    return ranks, problems


class Command(ProjectCommand):
    def syntax(self) -> str:
        return "NAME import FILE [--positions] | NAME top [--limit N] [--json]"

    def short_desc(self) -> str:
        return "Import host ranks, or show the best-ranked hosts"

    def long_desc(self) -> str:
        return (
            "import: a CSV of host,rank (a higher rank is a more important host; with "
            "--positions the second column is a place in a list, 1 the top) gives each "
            "host its rank, whatever the crawl had learned; the crawl's own links raise it "
            "later. A row that is not host,rank is reported with its line number and "
            "skipped. top: the best-ranked hosts with their rank, what they were given "
            "and their page budget."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--positions", action="store_true",
                            help="the second column is a place in a list, 1 the top")  # fmt: skip
        parser.add_argument("--limit", type=int, default=20, metavar="N", help="top N hosts")
        parser.add_argument("--json", action="store_true", help="top as JSON")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        wanted = {"import": 3, "top": 2}
        if len(args) < 2 or len(args) != wanted.get(args[1]):
            raise UsageError("expected: scrapy hostrank NAME import FILE | NAME top")
        if opts.limit < 1:
            raise UsageError("--limit must be a positive number")
        assert self.settings is not None
        settings = installed.effective(self.settings)
        server = redis_for_command(self.settings)
        ranks = HostRanks(server, sharding.as_recorded(server, spider_keys(self.settings, args[0])))
        if args[1] == "import":
            self._import(ranks, args[2], opts.positions, settings.get("FRONTIER_QUEUE_BY"))
            return
        budget = RankBudget.from_settings(settings) or settings.getint("HOST_PAGE_BUDGET")
        rows = ranks.top_rows(opts.limit, budget)
        if opts.json:
            print(json.dumps({"hosts": rows}))
            return
        if not rows:
            print(
                "no host ranks yet: they are learned from the links between registered "
                'domains while the crawl runs with FRONTIER_ORDER = "importance" or '
                "HOST_BUDGET_BY_RANK set, or imported: scrapy hostrank NAME import FILE",
                file=sys.stderr,
            )
            return
        print(f"{'host':40s} {'rank':>10s} {'leased':>8s} {'budget':>8s}")
        for row in rows:
            limit = str(row["budget"]) if row["budget"] else "-"
            print(f"{row['host'][:40]:40s} {row['rank']:10g} {row['leased']:8d} {limit:>8s}")

    def _import(self, ranks: HostRanks, path: str, positions: bool, queue_by: str) -> None:
        try:
            with open(path, encoding="utf-8", errors="replace", newline="") as lines:
                found, problems = read_ranks(lines, positions)
        except OSError as exc:
            raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
        for problem in problems:
            print(f"{path}: {problem}, skipped", file=sys.stderr)
        by_group: dict[str, float] = {}
        for host, rank in found.items():
            netloc = f"[{host}]" if ":" in host else host  # an IPv6 address
            group = group_for(f"http://{netloc}/", by=queue_by)
            by_group[group] = max(rank, by_group.get(group, 0.0))
        ranks.set_ranks(by_group)
        print(f"imported {len(by_group)} host ranks ({len(problems)} rows skipped)")
