"""``scrapy botauth keygen PATH``: an Ed25519 key to sign requests with (Web Bot
Auth), and the key directory to publish for it."""

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

from extensions.botauth import DIRECTORY_PATH, DIRECTORY_SUFFIX, directory, thumbprint
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
            "BOT_AUTH_SIGNATURE_AGENT = the https URL the directory is published at."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument(
            "--days", type=int, default=365, help="days the key is valid (its exp; default 365)"
        )

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 2 or args[0] != "keygen":
            raise UsageError("usage: scrapy botauth keygen PATH [--days N]")
        if opts.days < 2:
            raise UsageError("--days must be 2 or more: a key expiring within a day is refused")
        path = Path(args[1])
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
        now = int(time.time())
        document = directory(key.public_key(), not_before=now, expires=now + opts.days * 86_400)
        published.write_text(json.dumps(document, indent=2) + "\n")
        print(f"key: {path} (keyid {thumbprint(key.public_key())})")
        print(f"key directory: {published}: publish it at https://YOUR.SITE{DIRECTORY_PATH}")
        print(f'settings: BOT_AUTH_KEY = "{path}"')
        print(f'          BOT_AUTH_SIGNATURE_AGENT = "https://YOUR.SITE{DIRECTORY_PATH}"')
