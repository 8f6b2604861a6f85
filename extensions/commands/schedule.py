"""``scrapy schedule NAME``: start spider NAME on every scrapyd node."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from scrapy.exceptions import UsageError

from extensions.cli import ProjectCommand, spider_keys
from extensions.scrapyd import ScrapydError, make_nodes, node_urls

if TYPE_CHECKING:
    import argparse


def add_node_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nodes", metavar="URL,URL", help="scrapyd nodes (else SCRAPYD_NODES)")
    parser.add_argument("--project", help="scrapyd project (else SCRAPYD_PROJECT, 'crawler')")


def nodes_and_project(opts: argparse.Namespace, settings) -> tuple[list, str]:
    urls = node_urls(opts.nodes, settings)
    if not urls:
        raise UsageError("no scrapyd nodes: pass --nodes URL,URL or set SCRAPYD_NODES")
    try:
        nodes = make_nodes(urls, settings)
    except ScrapydError as exc:
        raise UsageError(str(exc)) from None
    project = opts.project or settings.get("SCRAPYD_PROJECT")
    return nodes, project


class Command(ProjectCommand):
    def syntax(self) -> str:
        return "NAME [--nodes URL,URL] [--setting NAME=VALUE ...] [-a NAME=VALUE ...]"

    def short_desc(self) -> str:
        return "Start a spider on every scrapyd node"

    def long_desc(self) -> str:
        return (
            "Schedule spider NAME on each scrapyd node and print each node's job id. "
            "--setting NAME=VALUE reaches the jobs as a Scrapy setting (-s) and -a "
            "NAME=VALUE as a spider argument; connection settings are best left to the "
            "nodes' environment (REDIS_URL, MONGO_URI). Exit status 1 if any node failed."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        add_node_options(parser)
        parser.add_argument("--setting", action="append", default=[], metavar="NAME=VALUE",
                            help="a setting for the jobs")  # fmt: skip
        parser.add_argument("-a", dest="spargs", action="append", default=[],
                            metavar="NAME=VALUE", help="a spider argument")  # fmt: skip

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1:
            raise UsageError("name one spider: scrapy schedule NAME")
        assert self.settings is not None
        spider_keys(self.settings, args[0])  # an unknown spider is a usage error here
        for pair in opts.setting + opts.spargs:
            if "=" not in pair:
                raise UsageError(f"expected NAME=VALUE, got {pair!r}")
        spider_args = dict(pair.split("=", 1) for pair in opts.spargs)
        nodes, project = nodes_and_project(opts, self.settings)
        failed = 0
        for node in nodes:
            try:
                job = node.schedule(project, args[0], opts.setting, spider_args)
            except ScrapydError as exc:
                failed += 1
                print(f"{node.label}  failed: {exc}", file=sys.stderr)
            else:
                print(f"{node.label}  job {job}")
        if failed:
            self.exitcode = 1
