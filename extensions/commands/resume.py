"""``scrapy resume NAME [--crawl ID]``: a paused crawl (or every one) is leased
again, exactly where it stood."""

from __future__ import annotations

from extensions.commands import pause


class Command(pause.Command):
    verb = "resume"
    done = "resumed"

    def short_desc(self) -> str:
        return "Resume a paused crawl (or every crawl) of a spider"
