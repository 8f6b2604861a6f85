"""Scrapy's downloader with a last look before a request goes on the wire.

A request passes the downloader middlewares, then waits in its download slot's
queue for a free transfer slot. A host that pushes back in that time (a 429 on
this node, a hold heard from another) has its waiting requests sent into the
window it asked for: up to a node's per-host concurrency of them. Here each
request meets the send gate (``send_gate_of``: the pushback middleware's)
as its slot sends it; a request of a held host goes back to the engine as the
copy the gate returns (parked in Redis until the hold ends) and never reaches
the host.

The add-on makes this Scrapy's ``DOWNLOADER`` unless a project names its own
(holds are then checked before the slot queue only).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from scrapy.core.downloader import Downloader

from extensions.runtime import peek_state, set_state

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.core.downloader import Slot
    from scrapy.crawler import Crawler
    from scrapy.http import Response


#: request -> its parked copy when its host is held as the downloader is about
#: to send it, else None
SendGate = Callable[["Request"], Any]


def set_send_gate(crawler: Crawler, gate: SendGate) -> None:
    set_state(crawler, SendGate, gate)


def send_gate_of(crawler: Crawler) -> SendGate | None:
    gate: SendGate | None = peek_state(crawler, SendGate)
    return gate


class GatedDownloader(Downloader):
    def __init__(self, crawler: Crawler):
        super().__init__(crawler)  # builds the middlewares: the pushback one sets the gate
        self.send_gate = send_gate_of(crawler)
        # a DOWNLOAD_DELAY is the cluster's pace per host (politeness.py), never a
        # wait of this node's on top of it
        self._delay = 0.0

    async def _download(self, slot: Slot, request: Request) -> Response | Request:  # type: ignore[override]
        instead = self.send_gate(request) if self.send_gate is not None else None
        if instead is not None:
            # a Request result skips the middlewares' process_response and the
            # engine queues it: the parked copy, its lease released with it
            return instead
        return await super()._download(slot, request)
