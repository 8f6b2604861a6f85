"""The host pushback's control loop (scripts/host_feedback.lua) on a real Redis,
driven by a simulated clock: minutes of a host's answers in a second of test.

The cluster is modelled as what the frontier does with a host's state: it sends
at the adaptive rate (unpaced: as fast as its concurrency allows) and nothing
while the host is held; refusals are reported at once, good answers once a
second while the host is watched (before that, with the next refusal, as a
node's history). The hosts are models of real ones: nginx's ``limit_req`` (a
leaky bucket at R requests/s with a burst, 429 with ``Retry-After``), and a
healthy site with a few broken URLs. The same loop against a real nginx and
real nodes is in ``tests/test_pushback.py``.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

import pytest

from extensions.frontier.hosts.state import AGAIN, OK, PUSH, Backoff, Event, HostStates
from extensions.keys import SpiderKeys

GROUP = "h"
Host = Callable[[float, int], str]  # (time, page) -> "ok", "429" or "503"


class Limiter:
    """nginx's limit_req: a leaky bucket at ``rate``/s holding ``burst`` more."""

    def __init__(self, rate: float, burst: int, retry_after: float | None = 3.0):
        self.rate, self.burst, self.retry_after = rate, burst, retry_after
        self.excess, self.last = 0.0, None
        self.lifted_at = float("inf")

    def __call__(self, t: float, page: int) -> str:
        if t >= self.lifted_at:
            return "ok"
        if self.last is not None:
            self.excess = max(self.excess - (t - self.last) * self.rate, 0.0)
        self.last = t
        if self.excess > self.burst:
            return "429"
        self.excess += 1
        return "ok"


class BrokenPages:
    """A healthy host where 1.2 % of pages answer 503 twice, then 200, and 0.6 %
    answer one 429 with Retry-After: 2."""

    retry_after = 2.0

    def __init__(self, seed: int = 7):
        self.rng = random.Random(seed)
        self.left: dict[int, list[str]] = {}

    def __call__(self, t: float, page: int) -> str:
        if page not in self.left:
            x = self.rng.random()
            self.left[page] = ["503", "503"] if x < 0.012 else ["429"] if x < 0.018 else []
        return self.left[page].pop(0) if self.left[page] else "ok"


def simulate(client, answer: Host, seconds: float, unpaced: float) -> list[tuple[float, str]]:
    """Send to one host for ``seconds`` of simulated time; each answer and when."""
    keys = SpiderKeys.for_spider("sim")
    states = HostStates(client, keys, Backoff())
    start = t = time.time()
    client.hset(keys.host(GROUP), "orate", unpaced)  # what leases observed
    good = 0
    history = 0.0  # answers no node reported yet
    next_report = t + 1
    refused: set[int] = set()
    retries: list[tuple[float, int]] = []
    pages = 0
    answers: list[tuple[float, str]] = []
    while t < start + seconds:
        state = {k.decode(): v.decode() for k, v in client.hgetall(keys.host(GROUP)).items()}
        adapted = float(state["arate"]) if "arate" in state else None
        hold = float(state.get("hold", 0)) / 1000
        t = hold if t < hold else t + 1 / (adapted or unpaced)
        if t >= next_report:
            watched = adapted or hold > t or float(state.get("ew", 0)) / 1000 > t
            if good and watched:
                states.report([Event(GROUP, OK, answers=good, latency=0.05)], now=t)
            else:
                history += good
            good, next_report = 0, t + 1
        if retries and retries[0][0] <= t:
            page = retries.pop(0)[1]
        else:
            pages += 1
            page = pages
        outcome = answer(t, page)
        answers.append((t, outcome))
        if outcome == "ok":
            good += 1
            continue
        kind = AGAIN if page in refused else PUSH
        refused.add(page)
        retry_after = getattr(answer, "retry_after", None) if outcome == "429" else None
        states.report([Event(GROUP, kind, retry_after, history=history)], now=t)
        history = 0.0
        retries.append((t + 3, page))
        retries.sort()
    return answers


def steady(answers: list[tuple[float, str]], after: float, until: float | None = None):
    """(good answers per second, share refused) from ``after`` seconds in."""
    start = answers[0][0]
    part = [(t, a) for t, a in answers if after <= t - start <= (until or float("inf"))]
    good = sum(1 for _, a in part if a == "ok")
    return good / (part[-1][0] - part[0][0]), 1 - good / len(part)


@pytest.mark.parametrize(
    ("rate", "burst", "unpaced"), [(4, 4, 100), (4, 4, 30), (10, 5, 100), (8, 8, 100)]
)
def test_a_rate_limiter_is_found_and_the_cluster_holds_just_under_it(
    redis_client, rate, burst, unpaced
):
    answers = simulate(redis_client, Limiter(rate, burst), seconds=300, unpaced=unpaced)
    per_second, refused = steady(answers, after=30)
    assert per_second >= 0.8 * rate, (per_second, refused)
    assert refused <= 0.10, (per_second, refused)


def test_pages_that_fail_on_their_own_never_slow_a_healthy_host(redis_client):
    answers = simulate(redis_client, BrokenPages(), seconds=200, unpaced=25)
    keys = SpiderKeys.for_spider("sim")
    state = {k.decode(): v.decode() for k, v in redis_client.hgetall(keys.host(GROUP)).items()}
    assert sum(1 for _, a in answers if a != "ok") >= 30  # the failures were there
    assert "arate" not in state and "strikes" not in state, state
    assert int(state["page_refusals"]) >= 30
    # the 429s' Retry-After holds the host while it runs, and that is all it costs
    assert "why" not in state or state["why"] == "retry-after"


def test_the_rate_climbs_back_within_a_minute_once_the_host_takes_more(redis_client):
    limiter = Limiter(4, 4)
    limiter.lifted_at = time.time() + 120
    answers = simulate(redis_client, limiter, seconds=190, unpaced=100)
    before, _ = steady(answers, after=60, until=120)
    assert before < 6  # held near the limit while it was there
    after, refused = steady(answers, after=180)
    assert after >= 50 and refused == 0  # a minute later: unpaced again
