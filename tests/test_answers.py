"""A node's answers per host before Redis hears of them (extensions/frontier/hosts/answers.py):
each answer reaches Redis once, with the first refusal or the first report of a
watched host, and memory stays bounded however many hosts a node meets."""

import time

import pytest

from extensions.frontier.hosts import answers
from extensions.frontier.hosts.answers import AnswerLedger
from extensions.frontier.hosts.state import OK


def test_answers_of_a_quiet_host_stay_on_the_node_until_its_first_refusal():
    ledger = AnswerLedger(window=40.0)
    for _ in range(30):
        ledger.answered("quiet", watched=False, latency=0.1)
    assert ledger.take_reports() == []  # a host that never refused costs Redis nothing
    history = ledger.refused("quiet")
    assert history == pytest.approx(30, abs=0.1)  # decayed by the few ms since
    assert ledger.refused("quiet") == 0.0  # sent once, never twice
    # watched now: its answers go in the next report
    ledger.answered("quiet", watched=False, latency=0.2)
    [event] = ledger.take_reports()
    assert (event.group, event.kind, event.answers) == ("quiet", OK, 1)
    assert event.latency == pytest.approx(0.2) and event.history == 0.0


def test_a_host_watched_by_its_lease_brings_the_nodes_earlier_answers_along():
    ledger = AnswerLedger(window=40.0)
    for _ in range(10):
        ledger.answered("h", watched=False, latency=0.1)  # leased before it was watched
    for _ in range(3):
        ledger.answered("h", watched=True, latency=0.3)
    [event] = ledger.take_reports()
    assert event.answers == 3 and event.latency == pytest.approx(0.3)
    assert event.history == pytest.approx(10, abs=0.1)
    assert ledger.take_reports() == []


def test_old_answers_decay_and_a_watch_ends(monkeypatch):
    ledger = AnswerLedger(window=10.0)
    now = time.time()
    monkeypatch.setattr(time, "time", lambda: now)
    ledger.answered("h", watched=False, latency=0.0)
    monkeypatch.setattr(time, "time", lambda: now + 10.0)
    assert ledger.refused("h") == pytest.approx(1 / 2.718281828, rel=1e-6)  # one window: 1/e
    monkeypatch.setattr(time, "time", lambda: now + 10.0 + 3 * 10.0 + 1)
    ledger.take_reports()  # the watch is over
    ledger.answered("h", watched=False, latency=0.0)
    assert ledger.take_reports() == []


def test_a_node_remembers_a_bounded_number_of_hosts(monkeypatch):
    monkeypatch.setattr(answers, "HOSTS_REMEMBERED", 100)
    ledger = AnswerLedger(window=40.0)
    for n in range(1000):
        ledger.answered(f"host{n}", watched=False, latency=0.0)
    assert ledger.take_history("host0") == 0.0  # the oldest went first
    assert ledger.take_history("host999") == pytest.approx(1, abs=0.01)
    assert len(ledger._history) == 99
