"""The frontier's parts (FRONTIER_PARTS): a project's own part is called where a
capability meets the core, and a part left out is not there. A real scheduler on
a real Redis, in-process."""

from __future__ import annotations

from typing import Any

import pytest
from scrapy import Request

from extensions.api.part import ApiResultsPart
from extensions.commands.status import render
from extensions.connection import text
from extensions.frontier.context import PartContext, WriteSection
from extensions.frontier.crawls.part import CrawlsPart
from extensions.frontier.overflow.part import OverflowPart
from extensions.frontier.part import FrontierPart, StatusParts, StatusView
from extensions.frontier.ranks.part import RanksPart
from extensions.frontier.render.part import RenderPart
from extensions.keys import SpiderKeys
from extensions.observability.status import crawl_status
from extensions.purpose.part import PurposePart
from extensions.recrawl.part import RecrawlPart
from extensions.scope.part import ScopePart
from extensions.wire.part import WirePart
from tests.conftest import queued
from tests.test_scheduler_unit import dlq, open_scheduler, stop_loops

HELD = "tests.test_parts.HoldingPart"


class HoldingPart(FrontierPart):
    """Leases nothing while ``held``; says so in the node's heartbeat record."""

    made: list[HoldingPart] = []

    def __init__(self) -> None:
        self.held = True
        self.seen: list[str] = []
        self.beats = 0
        self.closed_after_flush = False
        HoldingPart.made.append(self)

    def enqueued(self, request: Request) -> None:
        self.seen.append(request.url)

    def lease_room(self, room: int) -> int:
        return 0 if self.held else room

    def heartbeat(self) -> None:
        self.beats += 1

    def checkpoint(self) -> dict[str, int]:
        return {"held_by_part": int(self.held)}

    def closed(self) -> None:
        self.closed_after_flush = True

    figures = {"held_nodes": "nodes a part holds"}

    @classmethod
    def status(cls, view: StatusView) -> dict[str, Any]:
        nodes = view.server.zrange(view.keys.nodes, 0, -1)
        held = [view.server.hget(view.keys.node(text(n)), "held_by_part") for n in nodes]
        return {"held_nodes": held.count(b"1")}

    @classmethod
    def status_lines(cls, status: dict[str, Any]) -> list[str]:
        return [f"held by a part: {status['held_nodes']} nodes"] if status["held_nodes"] else []

    @classmethod
    def node_status(cls, record: dict[str, str]) -> dict[str, Any]:
        return {"held_by_part": record.get("held_by_part") == "1"}

    @classmethod
    def node_notes(cls, row: dict[str, Any]) -> list[str]:
        return ["held by a part"] if row["held_by_part"] else []


KEEPING = "tests.test_parts.KeepingPart"


class PagesSeen(WriteSection):
    """A counter written with each flush; owed again when a flush fails."""

    name = "pages_seen"
    phase = "after"

    def __init__(self) -> None:
        self.owed = 0

    def take(self, parked_groups: list[str]) -> int:
        taken, self.owed = self.owed, 0
        return taken

    def queue(self, payload: int, frontier: Any, pipe: Any) -> None:
        pipe.hincrby(frontier.keys.checkpoint, "pages_seen", payload)

    def kept(self, payload: int) -> None:
        self.owed += payload


class KeepingPart(FrontierPart):
    """Through the extension points alone: refuses /bad URLs, keeps every
    finished lease until told, and writes a counter with the flush."""

    made: list[KeepingPart] = []

    def __init__(self, context: PartContext) -> None:
        self.context = context
        self.kept: list[bytes] = []
        self.section = PagesSeen()
        context.check_admitted(lambda request: "no /bad here" if "/bad" in request.url else None)
        context.gate_releases(self)
        context.write_with_flush(self.section)
        KeepingPart.made.append(self)

    @classmethod
    def from_context(cls, context: PartContext) -> KeepingPart:
        return cls(context)

    def take(self, request: Request, member: bytes) -> bool:
        self.kept.append(member)
        return True

    def held(self) -> list[bytes]:
        return list(self.kept)

    def let_go(self) -> None:
        self.context.release(self.kept)
        self.kept = []


class OldStylePart(FrontierPart):
    @classmethod
    def from_node(cls, node: Any) -> OldStylePart:
        return cls()


def test_a_part_meets_the_core_at_its_extension_points_only(redis_url, redis_client):
    scheduler = open_scheduler(redis_url, FRONTIER_PARTS={KEEPING: 500})
    node = scheduler.node
    try:
        part = KeepingPart.made[-1]
        assert scheduler.enqueue_request(Request("http://example.com/a"))
        assert not scheduler.enqueue_request(Request("http://example.com/bad"))
        (record,) = dlq(redis_client)
        assert (record["kind"], record["error"]) == ("invalid_request", "no /bad here")

        request = scheduler.next_request()
        assert request is not None and request.url == "http://example.com/a"
        member = node.leased.pop(request)  # the engine is done with it
        node.pending.finish(request, member)
        part.section.owed = 3
        node.flush()
        # the gate kept the lease: still held, in Redis and by the node
        assert redis_client.zcard("unit:leases:unit-node") == 1
        assert member in node.held_leases()
        assert redis_client.hget("unit:checkpoint", "pages_seen") == b"3"

        part.let_go()
        node.flush()
        assert redis_client.zcard("unit:leases:unit-node") == 0
        assert redis_client.hget("unit:checkpoint", "pages_seen") == b"3"  # written once
    finally:
        stop_loops(scheduler)


def test_a_part_built_from_the_node_is_refused_with_what_to_write_instead(redis_url):
    with pytest.raises(TypeError, match="from_context"):
        open_scheduler(redis_url, FRONTIER_PARTS={"tests.test_parts.OldStylePart": 500})


def test_the_default_parts_are_there_and_the_overflow_stays_out_without_its_setting(redis_url):
    scheduler = open_scheduler(redis_url)
    try:
        kinds = [type(part) for part in scheduler.node.parts]
        assert kinds == [CrawlsPart, PurposePart, ApiResultsPart, ScopePart, WirePart, RenderPart,
                         RecrawlPart, RanksPart]  # fmt: skip
        assert scheduler.node.parts.get(OverflowPart) is None
    finally:
        stop_loops(scheduler)


def test_a_projects_part_is_called_where_a_capability_meets_the_core(redis_url, redis_client):
    HoldingPart.made.clear()
    scheduler = open_scheduler(redis_url, FRONTIER_PARTS={HELD: 500})
    try:
        part = HoldingPart.made[-1]
        assert scheduler.node.parts.get(HoldingPart) is part
        assert scheduler.enqueue_request(Request("http://example.com/a"))
        assert not scheduler.enqueue_request(Request("ftp://example.com/refused"))
        assert part.seen == ["http://example.com/a"]  # admitted requests only

        assert scheduler.next_request() is None  # held: the lease asks for none
        assert len(queued(redis_client, "unit")) == 1  # but the write went in
        scheduler.node.duties.heartbeat()
        assert part.beats == 1
        assert redis_client.hget("unit:node:unit-node", "held_by_part") == b"1"

        part.held = False
        scheduler.node.polling.work_found()
        request = scheduler.next_request()
        assert request is not None and request.url == "http://example.com/a"
    finally:
        stop_loops(scheduler)
        scheduler.close("shutdown")
    assert part.closed_after_flush


def test_a_part_left_out_is_not_called(redis_url, redis_client):
    scheduler = open_scheduler(
        redis_url, FRONTIER_PARTS={"extensions.frontier.crawls.part.CrawlsPart": None}
    )
    try:
        assert scheduler.node.parts.get(CrawlsPart) is None
        scheduler.enqueue_request(Request("http://example.com/a", meta={"crawl_id": "job"}))
        scheduler.node.flush()
        assert len(queued(redis_client, "unit")) == 1
        assert not redis_client.hexists("unit:crawls", "job")  # nothing registered it
    finally:
        stop_loops(scheduler)


def test_with_its_part_a_crawl_is_registered_when_its_first_request_is_queued(
    redis_url, redis_client
):
    scheduler = open_scheduler(redis_url)
    try:
        scheduler.enqueue_request(Request("http://example.com/a", meta={"crawl_id": "job"}))
        assert redis_client.hget("unit:crawls", "job") == b"running"
    finally:
        stop_loops(scheduler)


def test_a_part_says_its_own_status_and_one_left_out_says_nothing(redis_url, redis_client):
    """``scrapy status``, the console and the metrics read the parts FRONTIER_PARTS
    names: a project's part adds its fields, line and node notes; a part left
    out adds none, and the rest of the status is whole."""
    render_left_out = {"extensions.frontier.render.part.RenderPart": None}
    scheduler = open_scheduler(redis_url, FRONTIER_PARTS={HELD: 500, **render_left_out})
    keys = SpiderKeys.for_spider("unit")
    try:
        scheduler.node.duties.heartbeat()
        parts = StatusParts.from_settings(scheduler.node.crawler.settings)
        assert RenderPart not in parts.classes and HoldingPart in parts.classes
        status = crawl_status(redis_client, keys, parts=parts)
        assert status["held_nodes"] == 1
        assert "render_queued" not in status and "render_nodes" not in status
        assert status["crawls"] == {} and status["recrawl"] == 0  # the others still there
        [node] = status["nodes"]
        assert node["held_by_part"] and node["notes"] == ["held by a part"]
        assert "render" not in node
        shown = render(status, None, [], parts)
        assert "held by a part: 1 nodes" in shown
        assert shown.splitlines()[-1].endswith("  held by a part")
        assert parts.figures["held_nodes"] == "nodes a part holds"

        # the project's defaults: the render lane says its figures, no part of the project's
        default = crawl_status(redis_client, keys)
        assert default["render_queued"] == 0 and "held_nodes" not in default
        assert "held_by_part" not in default["nodes"][0]
    finally:
        stop_loops(scheduler)


def test_a_nodes_tls_counts_that_are_not_numbers_read_as_none():
    """Anyone may write to Redis: a node's record is read, never trusted."""
    record = {"tls_connections": "abc", "tls_handshakes": "inf", "tls_resumed": "3"}
    assert WirePart.node_status(record) == {"connections": 0, "handshakes": 0, "resumed": 3}
    assert WirePart.node_notes({"connections": 0}) == []
