"""The frontier's parts (FRONTIER_PARTS): a project's own part is called where a
capability meets the core, and a part left out is not there. A real scheduler on
a real Redis, in-process."""

from __future__ import annotations

from scrapy import Request

from extensions.frontier.crawls.part import CrawlsPart
from extensions.frontier.overflow.part import OverflowPart
from extensions.frontier.part import FrontierPart
from extensions.frontier.recrawls.part import RecrawlPart
from extensions.frontier.render.part import RenderPart
from tests.conftest import queued
from tests.test_scheduler_unit import open_scheduler, stop_loops

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


def test_the_default_parts_are_there_and_the_overflow_stays_out_without_its_setting(redis_url):
    scheduler = open_scheduler(redis_url)
    try:
        kinds = [type(part) for part in scheduler.node.parts]
        assert kinds == [CrawlsPart, RenderPart, RecrawlPart]
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
