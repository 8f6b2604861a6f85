"""``scrapy botauth keygen PATH``: an Ed25519 key to sign requests with (Web Bot
Auth), and the key directory to publish for it; beside the project's keys, a
directory of them all, the new one valid from a day later (rotation)."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from scrapy.exceptions import UsageError

from extensions.botauth import (
    DIRECTORY_PATH,
    DIRECTORY_SUFFIX,
    SigningKey,
    directory,
    key_paths,
    thumbprint,
)
from extensions.cli import ProjectCommand

if TYPE_CHECKING:
    import argparse


class Command(ProjectCommand):
    requires_project = False

    def syntax(self) -> str:
        return "keygen PATH"

    def short_desc(self) -> str:
        return "Make an Ed25519 key to sign requests with (Web Bot Auth) and its key directory"

    def long_desc(self) -> str:
        return (
            "keygen PATH writes a new Ed25519 private key to PATH (PEM, readable by its "
            "owner only; never overwrites a file) and the key directory to publish for it, "
            "valid --days days (365), "
            f"at https://YOUR.SITE{DIRECTORY_PATH} to PATH.directory.json, and prints the "
            "settings that sign every request with it: BOT_AUTH_KEY = PATH and "
            "BOT_AUTH_SIGNATURE_AGENT = the https URL the directory is published at. In a "
            "project whose settings name keys already (BOT_AUTH_KEY, BOT_AUTH_KEYS), the "
            "new key goes beside them: its directory lists them all, to publish in place of "
            "the old one, and the new key signs from --start-in hours on (24 by default: "
            "time for verifiers to read the new directory); until then the old one does."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument(
            "--days", type=int, default=365, help="days the key is valid (its exp; default 365)"
        )
        parser.add_argument(
            "--start-in", type=float, default=None, dest="start_in", metavar="HOURS",
            help="hours from now the key is valid from (its nbf): 0 for a first key, 24 "
                 "beside the project's keys",
        )  # fmt: skip

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 2 or args[0] != "keygen":
            raise UsageError("usage: scrapy botauth keygen PATH [--days N] [--start-in HOURS]")
        if opts.days < 2:
            raise UsageError("--days must be 2 or more: a key expiring within a day is refused")
        if opts.start_in is not None and not 0 <= opts.start_in <= 24 * opts.days:
            raise UsageError("--start-in must be 0 or more hours, within the key's --days")
        path = Path(args[1])
        assert self.settings is not None
        beside = []
        for setting, old in key_paths(self.settings):
            try:
                beside.append((old, SigningKey.read(old)))
            except ValueError as exc:
                print(f"error: {setting} {old!r} {exc}", file=sys.stderr)
                self.exitcode = 1
                return
        start_in = opts.start_in if opts.start_in is not None else (24 if beside else 0)
        key = Ed25519PrivateKey.generate()
        pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())  # fmt: skip
        try:
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError as exc:
            print(f"error: {path} cannot be written: {exc.strerror or exc}", file=sys.stderr)
            self.exitcode = 1
            return
        with os.fdopen(descriptor, "wb") as out:
            out.write(pem)
        published = path.with_name(path.name + DIRECTORY_SUFFIX)
        starts = int(time.time() + start_in * 3600)
        document = directory(key.public_key(), not_before=starts,
                             expires=starts + opts.days * 86_400)  # fmt: skip
        document["keys"] += [signing.entry for _, signing in beside]
        published.write_text(json.dumps(document, indent=2) + "\n")
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(starts))
        print(f"key: {path} (keyid {thumbprint(key.public_key())}), valid from {when}")
        count = f" ({len(document['keys'])} keys)" if beside else ""
        print(f"key directory: {published}{count}: publish it at https://YOUR.SITE{DIRECTORY_PATH}")
        if beside:
            paths = ", ".join(f'"{p}"' for p in [*(old for old, _ in beside), str(path)])
            print(f"settings: BOT_AUTH_KEYS = [{paths}] (and BOT_AUTH_KEY empty); the new key "
                  f"signs from {when}, the old ones until then")  # fmt: skip
        else:
            print(f'settings: BOT_AUTH_KEY = "{path}"')
        print(f'          BOT_AUTH_SIGNATURE_AGENT = "https://YOUR.SITE{DIRECTORY_PATH}"')
