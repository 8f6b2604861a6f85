"""The render lane in a node's frontier. Requests a browser must fetch are queued
in their host's render group (``RenderPolicy``, at admission); a render node
leases them besides its other work, two for each page it may have open
(``RenderRoom``); a node that cannot render leases none and, when idle, waits for
them only with ``RENDER_WAIT_FOR_NODES``."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy import signals

from extensions.frontier.part import FrontierPart, StatusView
from extensions.render.actions import render_meta_problem
from extensions.render.policy import RenderPolicy
from extensions.render.setup import RenderRoom, renders_here

if TYPE_CHECKING:
    from scrapy import Request, Spider

    from extensions.frontier.context import PartContext
    from extensions.frontier.results import FrontierSizes

logger = logging.getLogger(__name__)
WAIT_LOG_INTERVAL = 60.0  # seconds between "render work waits" lines


class RenderPart(FrontierPart):
    figures = {"render_queued": "render queued", "render_nodes": "render nodes"}

    def __init__(self, context: PartContext):
        self.crawler = context.crawler
        settings = context.settings
        pages = settings.getint("RENDER_MAX_PAGES") if renders_here(settings) else 0
        #: the render requests this node may lease (none if it cannot render)
        self.room = RenderRoom(pages, context.wake)
        self.wait_for_nodes = settings.getbool("RENDER_WAIT_FOR_NODES")
        self._said = -WAIT_LOG_INTERVAL
        # which requests a browser fetches (RENDER_URLS, RENDER_AUTO), decided as
        # they are queued; a render action the spider names must be a known one
        context.check_admitted(lambda request: render_meta_problem(request.meta))
        policy = RenderPolicy.from_crawler(context.crawler)
        if policy is not None:
            context.decide_admitted(policy.decide)
        if pages:  # its heartbeats say so to the nodes that cannot render
            context.beat_into(context.keys.named("render_nodes"))

    @classmethod
    def from_context(cls, context: PartContext) -> RenderPart:
        return cls(context)

    @classmethod
    def status(cls, view: StatusView) -> dict[str, Any]:
        """Of the queued, the requests that wait for a render node; the ones alive."""
        alive_since = int((view.now - view.node_timeout) * 1000)
        return {
            "render_queued": view.sizes.render_queued,
            "render_nodes": int(
                view.server.zcount(view.keys.named("render_nodes"), alive_since, "+inf")
            ),
        }

    @classmethod
    def status_lines(cls, status: dict[str, Any]) -> list[str]:
        queued, nodes = status.get("render_queued", 0), status.get("render_nodes", 0)
        if not queued and not nodes:
            return []
        return [
            f"render: {queued} queued for a browser, {nodes} render "
            f"node{'s' if nodes != 1 else ''} alive"
            + ("" if nodes else " (render work waits for one: RENDER_ENABLED and a browser)")
        ]

    @classmethod
    def node_status(cls, record: dict[str, str]) -> dict[str, Any]:
        return {"render": record.get("render") == "1"}

    @classmethod
    def node_notes(cls, row: dict[str, Any]) -> list[str]:
        return ["renders"] if row.get("render") else []

    def open(self, spider: Spider) -> None:
        if self.room.pages:
            self.crawler.signals.connect(self.room.left, signals.request_left_downloader)

    def checkpoint(self) -> dict[str, Any]:
        return {"render": int(bool(self.room.pages))}

    def lease_shares(self) -> dict[str, int]:
        room = self.room.room()
        return {"render_count": room} if room else {}

    def took(self, request: Request) -> None:
        self.room.took(request)

    def finished(self, request: Request) -> None:
        self.room.left(request)

    def idle_pending(self, pending: int, sizes: FrontierSizes, now: float) -> int:
        """The pending work a node that cannot render waits for: all of it
        (RENDER_WAIT_FOR_NODES), or all but the render work."""
        if not sizes.render_queued or self.room.pages:
            return pending
        if now - self._said >= WAIT_LOG_INTERVAL and pending <= sizes.render_queued:
            self._said = now
            logger.info(
                "%d render requests wait for a render node (this node cannot render)%s",
                sizes.render_queued,
                "" if self.wait_for_nodes else ": not waiting for them",
            )
        if self.wait_for_nodes:
            return pending
        return max(0, pending - sizes.render_queued)
