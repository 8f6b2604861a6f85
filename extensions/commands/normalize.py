"""``scrapy normalize URL...``: what the URL normalizer chain makes of URLs, and why."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

from scrapy.exceptions import UsageError

from extensions import config
from extensions.cli import ProjectCommand
from extensions.exceptions import ConfigError
from extensions.urlnorm.chain import UrlNormalizerChain

if TYPE_CHECKING:
    import argparse


class Command(ProjectCommand):
    def syntax(self) -> str:
        return "URL [URL ...] [--json]"

    def short_desc(self) -> str:
        return "Show what the URL normalizer chain makes of URLs, and which step did what"

    def long_desc(self) -> str:
        return (
            "Put each URL through the chain every node runs on what it queues "
            "(URL_NORMALIZERS over URL_NORMALIZERS_BASE, with the project's settings and "
            "any -s given here) and print the URL it becomes, then each step that changed "
            "it. --json prints one object per URL: url, normalized, steps."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--json", action="store_true", help="one JSON object per URL")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if not args:
            raise UsageError("give at least one URL")
        assert self.settings is not None
        try:
            config.check(self.settings)
        except ConfigError as exc:
            print(f"error: {exc}", file=sys.stderr)
            self.exitcode = 1
            return
        chain = UrlNormalizerChain.from_settings(self.settings)
        for url in args:
            steps = chain.explain(url) if chain is not None else []
            normalized = steps[-1].after if steps else url
            if opts.json:
                shown = [{"step": s.name, "before": s.before, "after": s.after} for s in steps]
                print(json.dumps({"url": url, "normalized": normalized, "steps": shown}))
                continue
            print(normalized)
            if chain is None:
                print("  (URL_NORMALIZE_ENABLED is False: URLs are queued as they are)")
            elif not steps:
                print("  (already normal)")
            for step in steps:
                print(f"  {step.name:20s} {step.after}")
