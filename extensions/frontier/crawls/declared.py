"""Several crawls of one spider, declared (``extensions/capability.py``): their
settings and the frontier part; what a crawl under an id is: ``state.py``.
(Its keys, which the core scripts reach from the queues' prefix, are the core's:
``keys.py``.)"""

from __future__ import annotations

from typing import TYPE_CHECKING

from extensions.capability import Capability, Setting
from extensions.crawlid import crawl_id_problem
from extensions.settingchecks import number

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings


def _crawl_id(settings: BaseSettings, name: str) -> str | None:
    value = settings.get(name) or ""
    return crawl_id_problem(value) if value else None


CAPABILITY = Capability(
    name="crawls",
    about="several crawls of one spider (extensions/frontier/crawls/)",
    settings={
        "CRAWL_ID": Setting(
            "",
            'the crawl this node\'s own start requests join ("" = the crawl without an id; '
            "-a crawl_id=ID does the same)",
            _crawl_id,
        ),
        "CRAWL_PAGE_BUDGET": Setting(
            0,
            "requests a crawl under an id may be given, unless seeded with its own "
            "--budget; 0 = no limit",
            number(int, 0),
        ),
    },
    frontier_parts={"extensions.frontier.crawls.part.CrawlsPart": 100},
)
