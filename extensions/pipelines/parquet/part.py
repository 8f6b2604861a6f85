"""The Parquet store in the node's frontier: a segment of spooled rows is
committed in the transaction that releases its pages' leases, then published.

* A page with rows in a segment keeps its lease, once finished, until the
  segment is committed (the part is a release gate).
* A segment is sealed when it is ``PARQUET_ROLL_INTERVAL`` seconds old, holds
  ``PARQUET_FILE_SIZE`` bytes, or the node is idle or closing; once the engine
  is done with all its pages, the next flush writes its record into the
  manifest (``NAME:parquet:files``) and releases their leases, in one
  transaction (``parquet_commit.lua``, before the release, so a page whose
  lease this node lost is left out of the file: its new holder stores it).
* A committed segment is built and published in a worker thread; its spool
  file goes once the file is where readers find it.
* A node killed before a commit leaves its pages' leases to expire: they are
  fetched again, and the segment, found in no record, is dropped by the next
  node on that disk. Killed after it, its segment is published by that node,
  under the same name. Either way each page's rows reach the files once.

On a sharded frontier no transaction spans the shards: the record goes in the
round trip of the releases, after the writes.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from typing import TYPE_CHECKING, Any

import redis
from scrapy.exceptions import NotConfigured
from twisted.internet import threads

from extensions import connection
from extensions.cluster.checkpoint import node_id_for
from extensions.frontier.context import WriteSection
from extensions.frontier.part import FrontierPart, StatusView
from extensions.frontier.redisops import load_script, run_named
from extensions.pipelines.parquet import publish
from extensions.pipelines.parquet.pages import item_pages, wants_pages
from extensions.pipelines.parquet.spool import Segment, Spool, page_text, segment_id_of
from extensions.pipelines.parquet.state import parquet_state

if TYPE_CHECKING:
    from redis.client import Pipeline
    from scrapy import Request, Spider

    from extensions.frontier.context import PartContext
    from extensions.frontier.frontier import Frontier

logger = logging.getLogger(__name__)

#: seconds a closing node tries to publish what it committed
CLOSE_WAIT = 30.0
#: a failing publish is said once, then once a minute
SAY_EVERY = 60.0
#: a file name a manifest record may give: one file of the dataset's directory
FILE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,250}\.parquet")


class CommitSection(WriteSection):
    """Segment records, written in the flush that releases their pages' leases."""

    name = "parquet"

    def __init__(self, script: Any, files_key: str, sharded: bool):
        self.script = script
        self.files_key = files_key
        self.sharded = sharded
        # one transaction: before the releases, to read the leases they drop
        self.phase = "after" if sharded else "writes"  # type: ignore[misc]
        self.owed: list[tuple[Segment, str, list[bytes]]] = []

    def take(self, parked_groups: list[str]) -> list[tuple[Segment, str, list[bytes]]]:
        taken, self.owed = self.owed, []
        return taken

    def queue(self, payload: list[Any], frontier: Frontier, pipe: Pipeline) -> None:
        leases = frontier.shards[0].leases(frontier.node_id)
        for segment, record, members in payload:
            if self.sharded:
                pipe.hset(self.files_key, segment.id, record)
            else:
                run_named(self.script, {"leases": leases, "files": self.files_key},
                          {"segment": segment.id, "record": record}, pipe, members)  # fmt: skip

    def kept(self, payload: list[Any]) -> None:
        self.owed = payload + self.owed

    def owes(self, segment: Segment) -> bool:
        return any(owed is segment for owed, _, _ in self.owed)


class ParquetPart(FrontierPart):
    figures = {"parquet_files": "Parquet files"}

    def __init__(self, context: PartContext):
        self.context = context
        self.crawler = context.crawler
        self.stats = context.stats
        settings = context.settings
        self.where = settings.get("PARQUET_URI") or settings.get("ITEMS_DIR")
        self.roll_interval = settings.getfloat("PARQUET_ROLL_INTERVAL")
        self.max_size = settings.getint("PARQUET_FILE_SIZE")
        self.state = parquet_state(context.crawler)
        self.spool: Spool = self.state.spool
        self.pages = item_pages(context.crawler)
        self.node_id = node_id_for(context.crawler)
        script = context.server.register_script(
            load_script("extensions.pipelines.parquet:parquet_commit")
        )
        self.section = CommitSection(script, self.state.files_key, context.keys.shards > 1)
        context.write_with_flush(self.section)
        context.gate_releases(self)
        self.files: publish.LocalFiles | publish.S3Files | None = None
        self._publishing = False
        #: held while segments are published (a worker thread, or the closing node)
        self._publish_lock = threading.Lock()
        self._orphans_due = True
        self.problem = ""
        self._said_at = 0.0

    @classmethod
    def from_context(cls, context: PartContext) -> ParquetPart:
        if not wants_pages(context.settings):
            raise NotConfigured  # no Parquet store: off, silently
        return cls(context)

    # --- status ----------------------------------------------------------------------

    @classmethod
    def status(cls, view: StatusView) -> dict[str, Any]:
        files = rows = 0
        for record in view.server.hvals(view.keys.named("parquet_files")):
            files += 1
            try:
                rows += int(json.loads(record).get("rows") or 0)
            except (ValueError, TypeError, AttributeError):
                continue  # another writer's: counted as a file
        return {"parquet_files": files, "parquet_rows": rows}

    @classmethod
    def status_lines(cls, status: dict[str, Any]) -> list[str]:
        if not status.get("parquet_files"):
            return []
        return [f"parquet: {status['parquet_files']} files committed, "
                f"{status.get('parquet_rows', 0)} rows published"]  # fmt: skip

    @classmethod
    def node_status(cls, record: dict[str, str]) -> dict[str, Any]:
        return {"parquet_waiting": int(record.get("parquet_waiting") or 0),
                "parquet_problem": record.get("parquet_problem", "")}  # fmt: skip

    @classmethod
    def node_notes(cls, row: dict[str, Any]) -> list[str]:
        if not row.get("parquet_problem"):
            return []
        return [f"parquet: {row.get('parquet_waiting', 0)} files wait to be published: "
                f"{row['parquet_problem']}"]  # fmt: skip

    def checkpoint(self) -> dict[str, Any]:
        waiting = sum(s.state == "committed" for s in self.spool.segments)
        return {"parquet_waiting": waiting, "parquet_problem": self.problem}

    # --- the gate ----------------------------------------------------------------------

    def take(self, request: Request, member: bytes) -> bool:
        self.pages.forget_page(member)
        return self.spool.finished(member)

    def held(self) -> list[bytes]:
        return self.spool.held()

    # --- the node's life ----------------------------------------------------------------

    def open(self, spider: Spider) -> None:
        self.files = publish.files_for(self.where, spider.name)
        logger.info("Parquet files go to %s (spool %s)", self.files, self.spool.node_dir)

    def idle_pending(self, pending: int, sizes: Any, now: float) -> int:
        if any(s.rows and not s.sealed for s in self.spool.segments):
            self.spool.seal(self.roll_interval, self.max_size, everything=True)
            self.context.wake()  # the next flush commits them
        return pending

    def before_flush(self) -> None:
        for segment in self.spool.ready():
            self._commit(segment, [])

    def _commit(self, segment: Segment, leave_out: list[bytes]) -> None:
        assert self.files is not None
        record = {
            "file": f"{self.spool.root.name}-{segment.stamp}-{segment.id}.parquet",
            "node": self.node_id,
            "committed_at": time.time(),
            "leave_out": [page_text(page) for page in leave_out],
        }
        members = list(segment.held)
        segment.held = []
        segment.state = "committing"
        self.context.release(members)
        self.section.owed.append((segment, json.dumps(record), members))

    def heartbeat(self) -> None:
        self.spool.seal(self.roll_interval, self.max_size)
        if self._publishing:
            return
        committing = [s for s in self.spool.segments
                      if s.state == "committing" and not self.section.owes(s)]  # fmt: skip
        if committing:
            found = self.context.server.hmget(self.state.files_key, [s.id for s in committing])
            for segment, record in zip(committing, found, strict=True):
                if record is not None:
                    segment.state = "committed"
        due = [s for s in self.spool.segments if s.state == "committed"]
        if due or self._orphans_due:
            self._publishing = True
            done = threads.deferToThread(self._publish_all, due, self._orphans_due)
            done.addBoth(self._published)

    def _published(self, result: Any) -> None:
        self._publishing = False
        if isinstance(result, BaseException) or hasattr(result, "getErrorMessage"):
            logger.error("publishing Parquet files: %s", result)

    def close(self) -> None:
        """Before the last flush: every segment sealed, and committed with the
        pages the engine finished; an unfinished page's rows stay out of the file,
        its lease goes back to the crawl."""
        if self.files is None:  # never opened: nothing spooled
            return
        self.spool.seal(self.roll_interval, self.max_size, everything=True)
        for segment in list(self.spool.segments):
            if segment.state == "open" and segment.rows:
                self._commit(segment, self.spool.unfinished(segment))

    def closed(self) -> None:
        """The last flush is done: what it committed is published now, tried for
        CLOSE_WAIT seconds at most; what is left is the next node's on this disk."""
        deadline = time.monotonic() + CLOSE_WAIT
        while not self.section.owed:
            try:
                self._publish_now()
            except redis.RedisError as exc:
                self.problem = str(exc)
            if not self.problem or time.monotonic() >= deadline:
                break
            time.sleep(1.0)
        left = [s for s in self.spool.segments if s.state != "open"]
        if left or self.section.owed:
            logger.warning("%d Parquet segments left in %s for the next node started on it: %s",
                           len(left) + len(self.section.owed), self.spool.node_dir,
                           self.problem or "their commit did not go in")  # fmt: skip
        self.spool.close()

    def _publish_now(self) -> None:
        committing = [s for s in self.spool.segments if s.state in ("committing", "committed")]
        if committing:
            found = self.context.server.hmget(self.state.files_key, [s.id for s in committing])
            due = [s for s, record in zip(committing, found, strict=True) if record is not None]
        else:
            due = []
        self._publish_all(due, self._orphans_due)

    # --- publishing (in a worker thread) -------------------------------------------------

    def _publish_all(self, due: list[Segment], orphans: bool) -> None:
        with self._publish_lock:
            self._publish_locked(due, orphans)

    def _publish_locked(self, due: list[Segment], orphans: bool) -> None:
        try:
            for segment in due:
                if segment.path.exists():  # (published by the closing node meanwhile)
                    self._publish(segment.id, segment.path)
                self.spool.done(segment)
            if orphans:
                self._take_orphans()
                self._orphans_due = False
        except Exception as exc:  # boto3's errors: S3 away, a bucket that refuses
            self._failed(exc)
            return
        if self.problem:
            logger.warning("Parquet files are published again")
            self.problem = ""

    def _failed(self, exc: BaseException) -> None:
        problem = f"{self.files}: {exc}"
        self.stats.inc_value("parquet/publish_errors")
        if problem != self.problem or time.monotonic() >= self._said_at + SAY_EVERY:
            logger.error("could not publish Parquet files (kept in %s, tried again at each "
                         "heartbeat): %s", self.spool.root, problem)  # fmt: skip
            self._said_at = time.monotonic()
        self.problem = problem

    def _publish(self, segment_id: str, path: Any) -> bool:
        """Build and publish a committed segment; False when the manifest has no
        record of it (never committed: its pages' leases were never released)."""
        assert self.files is not None
        server = self.context.server
        raw = server.hget(self.state.files_key, segment_id)
        if raw is None:
            return False
        record = _record(raw, self.spool.root.name, segment_id)
        if record.get("published"):
            return True
        self.state.schema.load()
        built = path.with_name(f"{segment_id}.parquet")
        if built.exists():  # built before a publish that failed (made whole, or not at all)
            rows = publish.rows_in(built)
        else:
            rows = publish.build(path, self.state.schema.types, record["leave_out"], built)
        self.files.put(built, record["file"])
        built.unlink(missing_ok=True)
        record.update(rows=rows, published=True, published_at=time.time())
        server.hset(self.state.files_key, segment_id, json.dumps(record))
        self.stats.inc_value("parquet/files_published")
        self.stats.inc_value("parquet/rows_published", rows)
        logger.info("published %s (%d rows)", record["file"], rows)
        return True

    def _take_orphans(self) -> None:
        """Spools of this disk whose node is gone: a committed segment is
        published, an uncommitted one dropped (its pages are fetched again)."""
        for directory, lock in self.spool.orphans():
            try:
                for path in self.spool.segment_files(directory):
                    if self._publish(segment_id_of(path), path):
                        self.stats.inc_value("parquet/orphans_published")
                    else:
                        self.stats.inc_value("parquet/orphans_dropped")
                        logger.warning("dropped %s: never committed (its pages are fetched "
                                       "again)", path)  # fmt: skip
                    path.unlink(missing_ok=True)
            except BaseException:
                lock.close()  # left for a later try, by this node or another
                raise
            Spool.forget(directory, lock)


def _record(raw: Any, spider: str, segment_id: str) -> dict[str, Any]:
    """A manifest record as the part reads it: a record another writer left
    malformed, or naming a file outside the dataset, still says the segment was
    committed: its file takes the name the segment's id gives it."""
    try:
        record = json.loads(connection.text(raw))
    except ValueError:
        record = None
    if not isinstance(record, dict):
        logger.warning("the manifest's record of %s is malformed: %r", segment_id, raw[:200])
        record = {}
    if not isinstance(record.get("file"), str) or not FILE_NAME.fullmatch(record["file"]):
        record["file"] = f"{spider}-{segment_id}.parquet"
    leave_out = record.get("leave_out")
    if not isinstance(leave_out, list) or not all(isinstance(p, str) for p in leave_out):
        record["leave_out"] = []  # an empty list from Lua's cjson is {}
    return record
