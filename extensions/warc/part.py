"""WARC capture in the node's frontier: what was archived is made durable
before the flush that releases its leases, so a page whose lease is gone is on
disk; a node killed before that leaves its leases to be taken back, and the
page is fetched, and archived, again. Only then are the new payloads entered
in the crawl's digest index, so no revisit refers to a record that was lost, and
the captures in its capture index."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import redis

from extensions import connection
from extensions.frontier.part import FrontierPart
from extensions.installed import switched_off
from extensions.warc.hold import hold_for
from extensions.warc.state import warc_state

if TYPE_CHECKING:
    from extensions.frontier.context import PartContext


class WarcPart(FrontierPart):
    def __init__(self, context: PartContext):
        self.crawler = context.crawler
        self.state = warc_state(context.crawler)
        self.hold = hold_for(context.crawler)
        self.look_again_now = context.wake
        self._waiting = False

    @classmethod
    def node_status(cls, record: dict[str, str]) -> dict[str, Any]:
        return {"warc_held": record.get("warc_held") == "1"}

    @classmethod
    def node_notes(cls, row: dict[str, Any]) -> list[str]:
        return ["held back: WARC_DIR takes no writes"] if row.get("warc_held") else []

    def lease_room(self, room: int) -> int:
        # the disk takes no writes: nothing leased until the hold's time is up
        self._waiting = self.hold.waiting()
        return 0 if self._waiting else room

    def heartbeat(self) -> None:
        if self._waiting and not self.hold.waiting():
            self._waiting = False
            self.look_again_now()  # the next page tries the disk

    def checkpoint(self) -> dict[str, Any]:
        return {"warc_held": int(self.hold.held)}

    @classmethod
    def from_context(cls, context: PartContext) -> WarcPart:
        if not context.settings.getbool("WARC_ENABLED"):
            raise switched_off(cls, "WARC_ENABLED is off")
        return cls(context)

    def before_flush(self) -> None:
        if self.state.files is None:
            return
        self.state.files.sync()
        publish_payloads(self.crawler)


def publish_payloads(crawler: Any) -> None:
    """Enter the synced records' payloads in the digest index, and their URLs'
    captures in the capture index; with Redis away they wait for the next flush
    (their pages stay archived in full)."""
    state = warc_state(crawler)
    stats = crawler.stats
    try:
        if state.payloads is not None:
            stats.inc_value("warc/payloads_entered", state.payloads.publish())
            stats.inc_value("warc/digests_not_entered", state.payloads.not_entered)
            state.payloads.not_entered = 0
        if state.captures is not None:
            stats.inc_value("warc/captures_entered", state.captures.publish())
            stats.inc_value("warc/captures_not_entered", state.captures.not_entered)
            state.captures.not_entered = 0
    except redis.RedisError as exc:
        stats.inc_value("warc/digest_errors")
        connection.health_for(crawler).failed(exc)
    except connection.mongo_error():
        stats.inc_value("warc/digest_errors")
