"""``scrapy settings``, with the project's add-ons applied: ``scrapy settings
--get FRONTIER_FETCH_BATCH`` shows the value a crawler will use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.commands.settings import Command as ScrapySettingsCommand

from extensions import installed

if TYPE_CHECKING:
    import argparse


class Command(ScrapySettingsCommand):
    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        assert self.settings is not None
        self.settings = installed.effective(self.settings)
        super().run(args, opts)
