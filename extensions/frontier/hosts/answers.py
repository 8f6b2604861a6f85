"""What one node saw its hosts answer: the evidence that tells a host that
refuses from a page that fails on its own (``scripts/host_feedback.lua``).

Redis hears of a host's good answers only while the host is *watched* (refused
lately, held or slowed): a host that never refuses costs no round trip. Until
then the node keeps a decayed count of the host's answers in memory (the newest
``HOSTS_REMEMBERED`` hosts), and that count goes to Redis with the node's first
refusal of the host, or with its first report once the host is watched, so the
share refused counts every node's answers, not only those since the refusal.
"""

from __future__ import annotations

import math
from collections import OrderedDict

from extensions import clock
from extensions.frontier.hosts.state import OK, Event

#: hosts whose unreported answers a node remembers: the newest, at most
HOSTS_REMEMBERED = 50_000
WATCHED_WINDOWS = 3  # evidence windows a node reports a host's answers after a refusal
REFUSED_URLS = 10_000  # URLs refused lately a node remembers, at most
REFUSED_MEMORY = 600.0  # seconds a refused URL is remembered


class RecentRefusals:
    """URLs refused lately on this node: one refused again (a retry, a recrawl)
    says more of its page than of its host."""

    def __init__(self) -> None:
        self._when: OrderedDict[str, float] = OrderedDict()

    def again(self, url: str) -> bool:
        """Whether ``url`` was refused lately; remembers it now."""
        now = clock.now()
        before = self._when.pop(url, None)
        self._when[url] = now
        if len(self._when) > REFUSED_URLS:
            self._when.popitem(last=False)
        return before is not None and now - before < REFUSED_MEMORY


class AnswerLedger:
    """One node's answers per host (queue group), until Redis hears of them."""

    def __init__(self, window: float):
        self.window = window  # s: the evidence's decay (HOST_BACKOFF_WINDOW)
        # group -> [answers not reported, decayed to when]
        self._history: OrderedDict[str, list[float]] = OrderedDict()
        # watched group -> [answers, latency sum, earlier answers not reported]
        self._good: dict[str, list[float]] = {}
        self._watch: dict[str, float] = {}  # group -> until when its answers are reported

    def answered(self, group: str, watched: bool, latency: float) -> None:
        """A good answer of ``group`` (``watched``: its lease said so)."""
        if watched or (self._watch and group in self._watch):
            good = self._good.get(group)
            if good is None:
                good = self._good[group] = [0, 0.0, self.take_history(group)]
            good[0] += 1
            good[1] += latency
            return
        now = clock.now()
        seen = self._history.get(group)
        if seen is None:
            self._history[group] = [1.0, now]
            if len(self._history) > HOSTS_REMEMBERED:
                self._history.popitem(last=False)
            return
        self._history.move_to_end(group)
        seen[0] = seen[0] * math.exp((seen[1] - now) / self.window) + 1
        seen[1] = now

    def refused(self, group: str) -> float:
        """A refusal of ``group``: from now on its answers are reported; the
        answers this node saw of it and did not report, decayed to now, and
        those of a watched host waiting for the next report. A refusal goes at
        once, its good answers once a second: without them a few broken pages
        refused within a second would weigh as a share of far fewer answers."""
        self._watch[group] = clock.now() + WATCHED_WINDOWS * self.window
        waiting = self._good.pop(group, None)
        unreported = waiting[0] + waiting[2] if waiting is not None else 0.0
        return self.take_history(group) + unreported

    def take_history(self, group: str) -> float:
        """The answers of ``group`` not yet reported, decayed to now; forgotten."""
        seen = self._history.pop(group, None)
        if seen is None:
            return 0.0
        return seen[0] * math.exp((seen[1] - clock.now()) / self.window)

    def take_reports(self) -> list[Event]:
        """The good answers of watched hosts since the last call, as events;
        hosts no longer watched are forgotten."""
        now = clock.now()
        for group in [group for group, until in self._watch.items() if until < now]:
            del self._watch[group]
        good, self._good = self._good, {}
        return [
            Event(group, OK, answers=int(n), latency=total / n, history=history)
            for group, (n, total, history) in good.items()
        ]
