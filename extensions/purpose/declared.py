"""A crawl's purpose, declared (``extensions/capability.py``): its settings, the
key of what was refused, the frontier part that counts it. How: ``policy.py``
(what refuses a purpose), ``judge.py`` (each page, on the node), ``part.py``
(the counts, with the flushes)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from extensions.capability import Capability, Key, Setting
from extensions.purpose.policy import ENFORCE, purpose_problem
from extensions.settingchecks import choice

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings


def _purpose(settings: BaseSettings, name: str) -> str | None:
    problem = purpose_problem(settings.get(name))
    signals = settings.getbool("USAGE_SIGNALS_ENABLED", True)
    if problem is None and settings.get(name) and not signals:
        return "needs USAGE_SIGNALS_ENABLED: the preferences a purpose is judged by are read there"
    return problem


CAPABILITY = Capability(
    name="purpose",
    about="a crawl's declared purpose, and the pages whose sites refuse it (extensions/purpose/)",
    settings={
        "CRAWL_PURPOSE": Setting(
            "",
            'what the crawl gathers for: "search", "ai-input" or "ai-train"; the items '
            "of a page whose usage preferences (robots.txt Content-Usage and "
            "Content-Signal, the page's headers) refuse it are dropped or flagged "
            "(USAGE_ENFORCE); empty = preferences recorded (_usage) only. A crawl id's "
            "own: scrapy seed --crawl ID --purpose P",
            _purpose,
        ),
        "USAGE_ENFORCE": Setting(
            "drop",
            'with a purpose: "drop" leaves out the items of a page that refuses it, '
            '"flag" keeps them with _usage_refused naming the refusal (train-ai=n)',
            choice(*ENFORCE),
        ),
    },
    keys={
        "usage_refused": Key(
            "%(name)s:usage:refused",
            "zset",
            "host -> pages whose usage preferences refused the crawl's purpose",
            "the nodes, with their flushes (purpose/part.py)",
        ),
        "usage_totals": Key(
            "%(name)s:usage",
            "hash",
            "refused (pages), refused:PURPOSE (pages), items_dropped",
            "the nodes, with their flushes (purpose/part.py)",
        ),
    },
    frontier_parts={"extensions.purpose.part.PurposePart": 110},
)
