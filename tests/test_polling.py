"""When an idle node asks Redis again (extensions/frontier/idle.py Polling), on
the reactor's own calls: nothing is waited for."""

from __future__ import annotations

import time

from scrapy import Spider
from scrapy.utils.test import get_crawler
from twisted.internet import reactor

from extensions import clock
from extensions.frontier.idle import Polling


def test_a_look_an_earlier_wake_came_too_soon_for_keeps_a_wake_of_its_own():
    """A paced host's next slot is due in 0.3 s while a wake set for an earlier
    look stands: when that wake comes, the look is not due yet, and a wake for
    it must stay, or the node sleeps to the engine's 5 s heartbeat while the
    slots of its hosts pass unused."""
    polling = Polling(get_crawler(Spider), 0.05, 1.0)
    try:
        for _ in range(8):  # backed off to its longest (a second): the first wake stands
            polling.back_off(time.monotonic(), None)
        polling.back_off(time.monotonic(), clock.now() + 0.3)  # what Redis said is due
        first = polling._wake_call
        assert first is not None and first.getTime() < reactor.seconds() + 0.2
        first.cancel()  # it came: the engine asks, and the look is not due yet
        assert not polling.due(time.monotonic())
        again = polling._wake_call
        assert again is not None and again.active()
        assert reactor.seconds() < again.getTime() <= reactor.seconds() + 0.31
    finally:
        polling.cancel()
