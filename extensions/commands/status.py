"""``scrapy status NAME [--json] [--watch]``: the crawl's frontier and every node.

``--watch`` redraws a live view every few seconds (plain text, fine over SSH):
progress, speed now and on average, ETA, the frontier, the top error reasons
and one line per node. ``--json`` prints one snapshot for scripts.
"""

from __future__ import annotations

import json
import sys
import time
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import UsageError

from extensions import clock, compat, defaults, sharding
from extensions.cli import ProjectCommand, redis_for_command, spider_keys
from extensions.cluster import series
from extensions.commands.crawls import CrawlsOf, render_one
from extensions.frontier.crawls.state import Crawls
from extensions.frontier.part import StatusParts
from extensions.observability.levels import UNKNOWN, level_rows
from extensions.observability.status import (
    SHARD_FIELDS,
    crawl_status,
    host_status,
    shard_status,
    top_errors,
)
from extensions.recrawl.statusstore import MongoStatusStore, store_kind

if TYPE_CHECKING:
    import argparse

#: seconds a node that closed cleanly stays in the text view's list of nodes
CLOSED_SHOWN_FOR = 600.0


def render(
    status: dict[str, Any], previous: dict[str, Any] | None, errors, parts: StatusParts
) -> str:
    """The --watch screen for one snapshot (``previous`` gives the speeds now;
    the frontier's ``parts`` say their own lines)."""
    lines = []
    done, discovered = status["done"], max(status["discovered"], status["done"], 1)
    width = 40
    filled = int(width * min(done / discovered, 1))
    if status["done"] > status["discovered"]:
        # every fetch counts as done, recrawls too: no share of the pages to show
        progress = f"{done} fetches of {status['discovered']} pages discovered (recrawls)"
    else:
        progress = f"{done}/{status['discovered']} done ({100 * done / discovered:.1f}%)"
    lines.append(f"{status['spider']}  [{'#' * filled}{'.' * (width - filled)}] {progress}")
    elapsed = (status["updated"] or status["time"]) - (status["started"] or status["time"])
    average = status["pages"] / elapsed if elapsed > 0 else 0.0
    items_average = status["items"] / elapsed if elapsed > 0 else 0.0
    now_rate = status.get("pages_per_s_last_minute", 0.0)
    items_now = status.get("items_per_s_last_minute", 0.0)
    now_label = "last min" if "pages_per_s_last_minute" in status and not previous else "now"
    eta = "-"
    if previous:
        dt = status["time"] - previous["time"]
        if dt > 0:
            now_rate = (status["pages"] - previous["pages"]) / dt
            items_now = (status["items"] - previous["items"]) / dt
            done_rate = (status["done"] - previous["done"]) / dt
            left = status["queued"] + status["in_flight"] + status["delayed"]
            before = previous["queued"] + previous["in_flight"] + previous["delayed"]
            if done_rate > 0 and left <= before:
                eta = time.strftime("%H:%M:%S", time.gmtime(left / done_rate))
    lines.append(
        f"pages/s {now_rate:7.1f} {now_label} {average:7.1f} avg   items/s {items_now:7.1f} "
        f"{now_label} {items_average:7.1f} avg   ETA {eta}"
    )
    spilled = status.get("spilled", 0)
    queued = status["queued"]
    if spilled:
        queued = f"{queued} ({queued - spilled} in Redis, {spilled} in MongoDB)"
    lines.append(
        f"queued {queued}   in flight {status['in_flight']}   delayed "
        f"{status['delayed']}   dead-lettered {status['dlq']}   start URLs {status['start_urls']}"
    )
    if status.get("noindex") or status.get("nofollow"):
        lines.append(f"pages that asked: noindex {status.get('noindex', 0)}   nofollow "
                     f"{status.get('nofollow', 0)} (meta robots, X-Robots-Tag)")  # fmt: skip
    lines += parts.lines(status)
    hooks = status.get("webhooks") or {}
    if hooks.get("waiting") or hooks.get("dead"):
        failing = f" (last failure: {hooks['failing']})" if hooks.get("failing") else ""
        lines.append(f"webhooks: {hooks['waiting']} events to send{failing}, "
                     f"{hooks['dead']} dead-lettered")  # fmt: skip
    if errors:
        lines.append("top errors: " + "; ".join(f"{reason} ({n})" for reason, n in errors))
    lines.append(
        f"{'node':32s} {'state':8s} {'heartbeat':>9s} {'pages/s':>8s} {'pages':>7s} {'items':>7s}"
    )
    old_nodes = {n["node"]: n for n in (previous or {}).get("nodes", [])}
    # a node that closed cleanly a while ago is history, not part of the cluster now
    gone = [
        n
        for n in status["nodes"]
        if n["state"] == "closed" and n["seconds_since_heartbeat"] > CLOSED_SHOWN_FOR
    ]
    folded = {n["node"] for n in gone}
    for node in status["nodes"]:
        if node["node"] in folded:
            continue
        rate = 0.0
        before = old_nodes.get(node["node"])
        if before and previous and status["time"] > previous["time"]:
            rate = (node["pages"] - before["pages"]) / (status["time"] - previous["time"])
        lines.append(
            f"{node['node']:32s} {node['state']:8s} {node['seconds_since_heartbeat']:>8.1f}s "
            f"{rate:8.1f} {node['pages']:7d} {node['items']:7d}"
            + "".join(f"  {note}" for note in node.get("notes", ()))
        )
    if gone:
        lines.append(
            f"and {len(gone)} node{'s' if len(gone) > 1 else ''} that closed more than "
            f"{CLOSED_SHOWN_FOR // 60:.0f} minutes ago ({sum(n['pages'] for n in gone)} pages; "
            "--json lists them)"
        )
    if not status["nodes"]:
        lines.append("(no node has joined this crawl yet: start one with scrapy crawl NAME)")
    return "\n".join(lines)


def render_shard(report: dict[str, Any]) -> str:
    head = f"{report['spider']}: shard {report['shard']} of {report['shards']}"
    counts = ", ".join(f"{report[k]} {k.replace('_', ' ')}" for k in SHARD_FIELDS)
    return f"{head} ({report['keys']})\n{counts}"


def render_hosts(rows: list[dict[str, Any]], learn_pairs: int = defaults.URL_LEARN_PAIRS) -> str:
    lines = [
        f"{'host':32s} {'queued':>8s} {'flight':>6s} {'fetched':>8s} {'rate/s':>7s} "
        f"{'state':>11s} {'for':>7s} {'budget':>7s} {'pushed':>6s} {'bans':>5s}  dropped"
    ]
    now = clock.now()
    if not rows:
        lines.append("(no host has queued work: seed the crawl, or see scrapy status NAME)")
    for row in rows:
        rate = f"{row['rate']:g}" if row["rate"] else "-"
        if row.get("adaptive_rate") is not None:
            rate = f"{row['adaptive_rate']:.3g}*"  # adapted to its pushback
        until = row.get("held_until") or row["next_allowed"]
        wait = f"{max(until - now, 0):.1f}s" if until else "-"
        state = row["state"]
        budget = "-" if row["budget_left"] is None else str(row["budget_left"])
        dropped = ", ".join(f"{reason} {n}" for reason, n in sorted(row["dropped"].items()))
        lines.append(
            f"{row['host'][:32]:32s} {row['queued']:8d} {row['in_flight']:6d} "
            f"{row['fetched']:8d} {rate:>7s} {state:>11s} {wait:>7s} {budget:>7s} "
            f"{row.get('pushbacks', 0):6d} {row.get('bans', 0):5d}  {dropped or '-'}"
            + _why_slow(row)
        )
    if any(row.get("adaptive_rate") is not None for row in rows):
        lines.append(
            "* the rate the host adapted to after refusing (429, 503: slowed on "
            "refused/answers), banning or failing to connect"
        )
    if any(_why_slow(row) for row in rows):
        lines.append(
            "refused now: pages refused / answers in the evidence window "
            "(HOST_BACKOFF_SHARE); alone: refusals not taken as the host's (a page's "
            "own, or before the evidence sufficed): no slowdown"
        )
    learned = [row for row in rows if row.get("learned_parameters")]
    for row in learned[:20]:
        params = row["learned_parameters"]
        gone = sorted(n for n, pairs in params.items() if pairs >= learn_pairs)
        kept = sorted(n for n, pairs in params.items() if pairs < 0)
        lines.append(
            f"{row['host']}: query parameters learned: dropped {', '.join(gone) or '-'}; "
            f"kept (they changed a page) {', '.join(kept) or '-'}"
        )
    spilled = [row for row in rows if row.get("spilled")]
    if spilled:
        lines.append("of the queued, in MongoDB (FRONTIER_OVERFLOW): " + ", ".join(
            f"{row['host']} {row['spilled']}" for row in spilled[:10]
        ) + (" ..." if len(spilled) > 10 else ""))  # fmt: skip
    return "\n".join(lines)


def render_levels(rows: list[dict[str, Any]], by: str) -> str:
    """``--ips`` / ``--domains``: one line per address or registered domain."""
    lines = [
        f"{by:28s} {'hosts':>6s} {'queued':>8s} {'flight':>6s} {'fetched':>8s} "
        f"{'rate/s':>7s} {'limit':>6s} {'held':>5s} {'line':>5s}  busiest hosts"
    ]
    for row in rows:
        limit = f"{row['limit']:g}" if row["limit"] else "-"
        lines.append(
            f"{str(row[by])[:28]:28s} {row['hosts']:6d} {row['queued']:8d} "
            f"{row['in_flight']:6d} {row['fetched']:8d} {row['rate']:7.2f} {limit:>6s} "
            f"{row['held']:5d} {row['line']:5d}  {', '.join(row['busiest_hosts'])}"
            + (f"  [server held: {row['server_refused']}]" if row.get("server_refused") else "")
        )
    setting = "CLUSTER_IP_RATE" if by == "address" else "CLUSTER_DOMAIN_RATE"
    if not rows:
        lines.append("(no host has queued work: seed the crawl, or see scrapy status NAME)")
    if any(row[by] in (UNKNOWN, "-", "?") for row in rows):
        lines.append(
            f"{UNKNOWN}: hosts the leases did not need to describe: their {by} is looked "
            f"up once {setting} is set (the nodes' settings), or since none of their "
            "requests was leased; -: a name with no address; ?: its lookup failed (held)"
        )
    return "\n".join(lines)


def _why_slow(row: dict[str, Any]) -> str:
    """What a host's state rests on: the hold's reason, the evidence it was slowed
    on and has now, the pages refused on their own."""
    parts = []
    if row.get("why"):
        parts.append("held: " + {"retry-after": "its Retry-After", "push": "it refuses",
                                 "errors": "connection errors", "ban": "a ban"}.get(
                                     row["why"], row["why"]))  # fmt: skip
    if row.get("adaptive_rate") is not None and row.get("slowed_on"):
        parts.append(f"slowed on {row['slowed_on']}")
    if row.get("evidence"):
        parts.append(f"refused now {row['evidence']}")
    if row.get("page_refusals"):
        parts.append(f"alone {row['page_refusals']}")
    tls = row.get("tls") or {}
    if tls.get("connections"):
        parts.append(f"TLS {tls['connections']} connections, {tls['handshakes']} handshakes, "
                     f"{tls['resumed']} resumed")  # fmt: skip
    if row.get("node"):
        parts.append(f"node {row['node']}")
    return ("  " + "; ".join(parts)) if parts else ""


class Command(CrawlsOf, ProjectCommand):
    def syntax(self) -> str:
        return (
            "NAME [--json] [--watch [--interval S] [--count N]] [--hosts | --ips | --domains "
            "[--limit N]] [--shard K] [--crawl ID]"
        )

    def short_desc(self) -> str:
        return "Show a distributed crawl's progress, frontier and nodes"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--json", action="store_true", help="print one JSON object")
        parser.add_argument("--watch", action="store_true", help="a live view, until Ctrl-C")
        parser.add_argument("--interval", type=float, default=3.0, metavar="S",
                            help="seconds between refreshes (default 3)")  # fmt: skip
        parser.add_argument("--count", type=int, default=0, metavar="N",
                            help="with --watch, stop after N refreshes")  # fmt: skip
        parser.add_argument("--hosts", action="store_true",
                            help="the busiest hosts (queue groups) instead")  # fmt: skip
        parser.add_argument("--ips", action="store_true",
                            help="the busiest server addresses: hosts on each, rate, held, "
                                 "queued (CLUSTER_IP_RATE)")  # fmt: skip
        parser.add_argument("--domains", action="store_true",
                            help="the busiest registered domains "
                                 "(CLUSTER_DOMAIN_RATE)")  # fmt: skip
        parser.add_argument("--limit", type=int, default=20, metavar="N",
                            help="with --hosts, --ips or --domains, at most N rows "
                                 "(default 20; 0 = all)")  # fmt: skip
        parser.add_argument("--shard", type=int, default=None, metavar="K",
                            help="one shard of a sharded frontier (FRONTIER_SHARDS): "
                                 "its sizes, or with --hosts its hosts")  # fmt: skip
        parser.add_argument("--crawl", metavar="ID", default=None,
                            help="one crawl of the spider (scrapy seed --crawl ID): its "
                                 "state and figures")  # fmt: skip

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1:
            raise UsageError("name one spider: scrapy status NAME [--json] [--watch]")
        if opts.interval <= 0 or opts.count < 0:
            raise UsageError("--interval must be positive and --count not negative")
        assert self.settings is not None
        keys = spider_keys(self.settings, args[0])
        server = redis_for_command(self.settings)
        keys = sharding.as_recorded(server, keys)
        node_timeout = self.settings.getfloat("NODE_TIMEOUT")
        stall_time = self.settings.getfloat("NODE_STALL_TIME")
        foreign = compat.foreign_state(server, keys)
        if foreign:
            raise SystemExit("error: " + "\n       ".join(foreign))
        if opts.crawl is not None:
            crawls = Crawls(server, keys)
            self.crawl_or_exit(crawls, opts.crawl)
            figures = crawls.figures(opts.crawl)
            print(json.dumps(figures.as_dict()) if opts.json else render_one(figures))
            return
        if opts.shard is not None:
            if not 0 <= opts.shard < keys.shards:
                raise UsageError(
                    f"--shard must be from 0 to {keys.shards - 1}: the crawl of "
                    f"{keys.name} has {keys.shards} shard{'s' if keys.shards > 1 else ''}"
                )
            if not opts.hosts:
                report = shard_status(server, keys, opts.shard)
                print(json.dumps(report) if opts.json else render_shard(report))
                return
        if opts.hosts or opts.ips or opts.domains:
            budget = self.settings.getint("HOST_PAGE_BUDGET")
            scope = keys if opts.shard is None else keys.shard(opts.shard)
            if opts.hosts:
                rows = host_status(server, scope, budget, opts.limit or None)
                print(json.dumps({"hosts": rows}) if opts.json
                      else render_hosts(rows, self.settings.getint("URL_LEARN_PAIRS")))  # fmt: skip
                return
            by = "address" if opts.ips else "domain"
            rows = level_rows(server, scope, host_status(server, scope, budget), by)
            rows = rows[: opts.limit] if opts.limit else rows
            name = "addresses" if by == "address" else "domains"
            print(json.dumps({name: rows}) if opts.json else render_levels(rows, by))
            return

        store = None
        if store_kind(self.settings) == "mongo":
            store = MongoStatusStore.from_settings(self.settings, keys.name)

        parts = StatusParts.from_settings(self.settings)

        def snapshot() -> dict[str, Any]:
            return crawl_status(
                server, keys, node_timeout, stall_time, status_store=store, parts=parts
            )

        if opts.json:
            print(json.dumps(snapshot()))
            return
        if not opts.watch:
            status = snapshot()
            now = clock.now()
            for kind in ("pages", "items"):
                status[f"{kind}_per_s_last_minute"] = series.last_minute_rate(
                    server, keys.series, now, kind
                )
            print(render(status, None, top_errors(server, keys), parts))
            return
        tty = sys.stdout.isatty()
        previous = None
        shown = 0
        try:
            while not opts.count or shown < opts.count:
                status = snapshot()
                screen = render(status, previous, top_errors(server, keys), parts)
                # A terminal gets the screen redrawn in place; a pipe gets one block per refresh.
                print(("\033[H\033[J" if tty else "\n") + screen, flush=True)
                previous, shown = status, shown + 1
                if not opts.count or shown < opts.count:
                    time.sleep(opts.interval)
        except KeyboardInterrupt:
            print()
