"""Host ranks, declared (``extensions/capability.py``): the settings, keys and
part of the capability; what a host's rank is and does: ``state.py``."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from extensions.capability import Capability, Key, Setting
from extensions.settingchecks import choice

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

BUDGET_FIELDS = ("floor", "per_rank", "ceiling")


def budget_problem(settings: BaseSettings, name: str) -> str | None:
    try:
        value = settings.getdict(name)
    except (TypeError, ValueError):
        return 'must be a dict, e.g. {"floor": 100, "per_rank": 20, "ceiling": 20000}'
    if not value:
        return None
    if set(value) != set(BUDGET_FIELDS):
        return f"must have exactly the keys {', '.join(BUDGET_FIELDS)}"
    try:
        numbers = {key: float(value[key]) for key in BUDGET_FIELDS}
    except (TypeError, ValueError):
        return "must give numbers"
    if not all(math.isfinite(n) and n >= 0 for n in numbers.values()):
        return "must give numbers of 0 or more"
    if numbers["floor"] < 1 or numbers["ceiling"] < numbers["floor"]:
        # a floor of 0 would drop the start URLs of every host no page links to
        return "must have a floor of at least 1 and a ceiling of at least its floor"
    return None


CAPABILITY = Capability(
    name="ranks",
    about="host ranks (extensions/frontier/ranks/)",
    settings={
        "FRONTIER_ORDER": Setting(
            "discovery",
            '"importance" gives hosts that more registered domains link to more of the '
            'lease turns; "discovery" is priority, then the order requests were found in',
            choice("discovery", "importance"),
        ),
        "HOST_BUDGET_BY_RANK": Setting(
            {},
            '{"floor": F, "per_rank": P, "ceiling": C}: a host\'s page budget is F + P * '
            "rank, at most C, in place of HOST_PAGE_BUDGET; {} = off",
            budget_problem,
        ),
    },
    keys={
        "hostrank": Key(
            "%(name)s:hostrank",
            "zset",
            "queue group (a host) -> its rank: how many registered domains link to it "
            "(learned from the pages the nodes fetch), or the rank scrapy hostrank import "
            "gave it, whichever is higher",
            "link_graph.lua (from spidermiddlewares/linkgraph.py); scrapy hostrank import",
            sharded=True,
        ),
        "inlinks": Key(
            "%(name)s:inlinks:%(group)s",
            "string",
            "a HyperLogLog of the registered domains that link to GROUP (a few dozen bytes "
            "for a host few link to, 12 KB at most)",
            "link_graph.lua",
            sharded=True,
        ),
    },
    frontier_parts={"extensions.frontier.ranks.part.RanksPart": 600},
)
