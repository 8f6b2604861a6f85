"""How ``-m paced`` tests are shared out among the few workers that run them
(Makefile, PACED_WORKERS): the longest first, each to the worker with the least
to do. tests/conftest.py takes the hook from here."""

from __future__ import annotations

import pytest

#: the paced tests' usual length (s), by test function, to share them out among
#: the workers that run them a few at a time (Makefile, PACED_WORKERS)
PACED_SECONDS = {
    "test_kill_9_during_spills_and_refills_and_a_mongodb_outage_lose_nothing": 75,
    "test_hosts_on_one_address_share_its_rate_and_a_domain_its_own": 65,
    "test_the_cluster_finds_a_real_rate_limiter_and_holds_just_under_it": 60,
    "test_a_host_that_keeps_banning_is_dead_lettered_as_banned": 45,
    "test_forty_names_on_one_address_use_its_rate_to_the_end_and_never_more": 45,
    "test_nothing_is_sent_inside_a_retry_after_window_but_what_was_on_the_wire": 40,
    "test_two_nodes_keep_the_templates_delay_for_the_cluster_quietly_and_a_new_crawl_"
    "starts_at_once": 30,
    "test_nodes_whose_clocks_are_off_keep_the_crawl_delay_and_say_so": 25,
}


def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """``-m paced`` on several workers: the longest test first, each to the
    worker with the least to do, so that none is left with two long ones while
    the others are done. xdist's own schedulers send tests in collection order,
    and its ``loadgroup`` marks a test's group in a node id pytest 9 no longer reads."""
    if config.getoption("markexpr") != "paced":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class PacedScheduling(LoadScopeScheduling):
        def __init__(self, config: pytest.Config, log=None):
            super().__init__(config, log)
            self.shares: dict[str, str] = {}  # node id -> its worker's scope

        def schedule(self) -> None:
            if self.collection is None and self.registered_collections:
                collection = next(iter(self.registered_collections.values()))
                self.shares = share_out(collection, len(self.nodes))
            super().schedule()

        def _split_scope(self, nodeid: str) -> str:
            return self.shares.get(nodeid, nodeid)

    return PacedScheduling(config, log)


def share_out(nodeids, workers: int) -> dict[str, str]:
    """Each node id's worker (a scope of xdist's), by longest processing time
    first; a test not in PACED_SECONDS counts as 20 s."""

    def seconds(nodeid: str) -> float:
        return PACED_SECONDS.get(nodeid.rpartition("::")[2].partition("[")[0], 20)

    loads = [0.0] * max(workers, 1)
    shares = {}
    for nodeid in sorted(nodeids, key=seconds, reverse=True):
        worker = loads.index(min(loads))
        loads[worker] += seconds(nodeid)
        shares[nodeid] = f"share{worker}"
    return shares
