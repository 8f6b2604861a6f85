"""``scrapy warc NAME lookup URL``: the archived records of a URL (``extensions/warc/``)."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

from scrapy.exceptions import UsageError

from extensions import installed
from extensions.cli import ProjectCommand
from extensions.exceptions import ConfigError
from extensions.warc.files import surt
from extensions.warc.storage import LocalArchive, S3Archive, archive_for

if TYPE_CHECKING:
    import argparse


def lookup(archive: LocalArchive | S3Archive, spider: str, url: str) -> tuple[list[dict], int]:
    """The index entries of ``url`` in the spider's files in ``archive``,
    oldest first, and how many index lines could not be read."""
    key = surt(url)
    found, bad = [], 0
    for name in archive.names(spider, ".warc.gz.cdxj"):
        index = archive.fetch(name)
        if index is None:
            continue
        with index.open(encoding="utf-8", errors="replace") as lines:
            for line in lines:
                if not line.startswith(key + " "):
                    continue
                try:
                    _, stamp, fields = line.split(" ", 2)
                    entry = {"timestamp": stamp, **json.loads(fields)}
                except ValueError:  # a line cut by a kill, or not one of ours
                    bad += 1
                    continue
                found.append(entry)
    found.sort(key=lambda entry: str(entry["timestamp"]))
    return found, bad


class Command(ProjectCommand):
    def syntax(self) -> str:
        return "NAME lookup URL [--json]"

    def short_desc(self) -> str:
        return "Find the archived records of a URL in the crawl's WARC files"

    def long_desc(self) -> str:
        return (
            "Reads the CDXJ index beside each of the spider's WARC files in WARC_DIR "
            "(a directory the nodes share, one node's, or s3://BUCKET/PREFIX) and prints "
            "each record of URL: when it was fetched, its status, the file and the offset "
            "of the record."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--json", action="store_true", help="one JSON object per line")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 3 or args[1] != "lookup":
            raise UsageError("expected: scrapy warc NAME lookup URL")
        assert self.settings is not None
        try:
            archive = archive_for(installed.effective(self.settings))
        except ConfigError as exc:
            raise UsageError(str(exc)) from None
        try:
            found, bad = lookup(archive, args[0], args[2])
        finally:
            archive.close()
        for entry in found:
            if opts.json:
                print(json.dumps(entry))
            else:
                print(f"{entry['timestamp']} {entry.get('status', '-')} {entry['filename']} "
                      f"offset {entry['offset']} length {entry['length']}")  # fmt: skip
        if bad:
            print(f"skipped {bad} index lines that could not be read", file=sys.stderr)
        if not found:
            print(f"no record of {args[2]} in {archive}", file=sys.stderr)
            self.exitcode = 1
