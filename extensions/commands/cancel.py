"""``scrapy cancel NAME``: cancel spider NAME's pending and running jobs on every
scrapyd node (a running node stops gracefully and hands its work back)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from scrapy.exceptions import UsageError

from extensions.cli import ProjectCommand, spider_keys
from extensions.commands.schedule import add_node_options, nodes_and_project
from extensions.scrapyd import ScrapydError

if TYPE_CHECKING:
    import argparse


class Command(ProjectCommand):
    def syntax(self) -> str:
        return "NAME [--nodes URL,URL]"

    def short_desc(self) -> str:
        return "Cancel a spider's jobs on every scrapyd node"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        add_node_options(parser)

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1:
            raise UsageError("name one spider: scrapy cancel NAME")
        assert self.settings is not None
        spider_keys(self.settings, args[0])
        nodes, project = nodes_and_project(opts, self.settings)
        failed = 0
        for node in nodes:
            try:
                jobs = node.jobs(project, args[0])
                for job in jobs:
                    before = node.cancel(project, job)
                    print(f"{node.label}  cancelled job {job} ({before})")
                if not jobs:
                    print(f"{node.label}  no {args[0]} jobs")
            except ScrapydError as exc:
                failed += 1
                print(f"{node.label}  failed: {exc}", file=sys.stderr)
        if failed:
            self.exitcode = 1
