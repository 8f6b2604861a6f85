"""What the sections of ``make bench`` share: the run's state, and what a section is."""

from __future__ import annotations

import os
from pathlib import Path

from tools.bench_crawl import (
    VARIANT_SPIDERS,
    VARIANTS,
    Figures,
    crawl_once,
)

NO_SUCH_PAGE = "/__bench_no_such_page"
WITHOUT_CRAWL_ID = "without a crawl id (as before)"
WITH_CRAWL_ID = "under a crawl id (seeded with --crawl)"
CRAWL_ID_VARIANTS = {WITHOUT_CRAWL_ID: "", WITH_CRAWL_ID: "bench"}


class Bench:
    """What the sections of one ``make bench`` share: its directory, its servers,
    and section 1's crawls (which sections 5 and 10 read too)."""

    def __init__(self, work: Path, redis_url: str, proxy_url: str, mongo_uri: str | None):
        self.work = work
        self.redis_url = redis_url
        self.proxy_url = proxy_url
        self.mongo_uri = mongo_uri
        self.one_node = {name: Figures() for name in VARIANTS}
        # each variant's CPU to start and stop around one 404: what a long crawl
        # spreads over its pages, apart from what each page costs
        self.start_cpu: dict[str, list[float]] = {name: [] for name in VARIANTS}
        self._one_node_runs: set[int] = set()

    def crawl_one_node(self, run: int) -> None:
        """Section 1's crawls for this run, once however many sections ask."""
        if run in self._one_node_runs:
            return
        self._one_node_runs.add(run)
        for name, settings in VARIANTS.items():
            spider = VARIANT_SPIDERS.get(name, "shop")
            self.one_node[name].samples.append(
                crawl_once(self.redis_url, settings, 1, self.work / f"items-{run}", spider=spider)
            )
            self.start_cpu[name].append(
                crawl_once(self.redis_url, settings, 1, self.work / f"start-{run}", spider=spider,
                           start_path=NO_SUCH_PAGE).cpu
            )  # fmt: skip


class Section:
    """One numbered comparison, a module of its own in ``sections/`` (found there,
    by its ``number``): ``measure`` is called in every run (the first only when
    ``once``), ``report`` after the last."""

    number: int
    title: str
    once = False
    needs_mongo = False

    def measure(self, bench: Bench, run: int) -> None:
        raise NotImplementedError

    def report(self, bench: Bench) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Stops what the section kept running from one run to the next."""


def mongo_server(bench: Bench) -> str:
    if os.environ.get("TEST_MONGO_URI"):
        return "a real MongoDB (TEST_MONGO_URI)"
    return "nx-27017, the MongoDB-wire server over SQLite: not MongoDB's speed"
