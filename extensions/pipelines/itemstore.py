"""The item pipeline that writes items in batches, off the reactor thread.

``process_item`` returns only once the item's batch is durable. That is what
lets the scheduler release a request's lease when the engine is done with it:
by then every item the request produced is in the store.

Batches are written when they reach ``ITEM_STORE_BATCH_SIZE`` items or their
oldest item is ``ITEM_STORE_FLUSH_INTERVAL`` seconds old, one batch at a time in
a worker thread. While ``ITEM_STORE_MAX_PENDING`` items wait, new items wait
for room, which slows the crawl down instead of growing memory.

Items go to MongoDB when ``MONGO_URI`` is set (collection NAME, or the
spider's or item class's ``mongo_collection``; unique key ``url``, or the
spider's ``item_key_field``), else to JSON Lines files. Every document carries
``_spider``, ``_node`` and ``_fetched_at``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from itemadapter import ItemAdapter
from scrapy import Item
from scrapy.exceptions import DropItem
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import defer, task, threads
from twisted.internet import reactor as _reactor
from twisted.python.failure import Failure

from extensions import defaults, signals
from extensions.cluster.checkpoint import node_id_for
from extensions.installed import require_addon
from extensions.itemtimes import FETCHED_AT, times_of
from extensions.pipelines.documents import COUNTED, KEY_FIELD, WriteReport
from extensions.pipelines.stores import ItemStore, JsonLinesStore
from extensions.recrawl.revisits import ignored_fields
from extensions.spidermiddlewares.crawlid import CRAWL_FIELD, crawl_of_item

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)
reactor: Any = _reactor  # Twisted types the installed reactor poorly


_SCALAR_TYPES = frozenset({str, int, float, bool, type(None)})


def _flat_copy(item: Any) -> dict[str, Any] | None:
    """A copy of a dict, Scrapy item or dataclass item whose values are all plain
    scalars, or None: itemadapter's copy looks into every value for a nested item."""
    if type(item) is dict:
        values = item
    elif isinstance(item, Item):
        values = item._values
    elif dataclasses.is_dataclass(item) and not isinstance(item, type):
        values = {f.name: getattr(item, f.name) for f in dataclasses.fields(item)}
    else:
        return None
    if all(type(value) in _SCALAR_TYPES for value in values.values()):
        return dict(values)
    return None


class ItemStorePipeline:
    def __init__(
        self,
        crawler: Crawler,
        store: ItemStore,
        *,
        batch_size: int = defaults.ITEM_STORE_BATCH_SIZE,
        flush_interval: float = defaults.ITEM_STORE_FLUSH_INTERVAL,
        max_pending: int = defaults.ITEM_STORE_MAX_PENDING,
    ):
        if batch_size < 1 or max_pending < batch_size or flush_interval <= 0:
            raise ValueError(
                "need ITEM_STORE_BATCH_SIZE >= 1, ITEM_STORE_MAX_PENDING >= "
                "ITEM_STORE_BATCH_SIZE and ITEM_STORE_FLUSH_INTERVAL > 0"
            )
        self.crawler = crawler
        self.stats = crawler.stats
        self.store = store
        self.batch_size = batch_size
        self.flush_interval = flush_interval
        self.max_pending = max_pending
        self.node_id = node_id_for(crawler)
        self._batch: list[tuple[dict[str, Any], defer.Deferred[None]]] = []
        self._batch_started = 0.0
        self._writing: defer.Deferred[Any] | None = None
        self._pending = 0
        self._room: list[defer.Deferred[None]] = []
        self._timer: task.LoopingCall | None = None
        #: the node waits for this store (signals.backlog_full): write what is held now
        self._hurry = False

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ItemStorePipeline:
        require_addon(crawler.settings, cls.__name__)
        s = crawler.settings
        assert crawler.spidercls is not None
        name = crawler.spidercls.name
        uri = s.get("MONGO_URI")
        store: ItemStore
        if uri:
            # imported only when used: pymongo adds a tenth of a second to every start
            from extensions.pipelines.mongo import MongoStore

            store = MongoStore(
                uri,
                s.get("MONGO_DATABASE"),
                getattr(crawler.spidercls, "mongo_collection", None) or name,
                key_field=getattr(crawler.spidercls, "item_key_field", None) or "url",
                node_id=node_id_for(crawler),
                journal_dir=Path(s.get("MONGO_JOURNAL_DIR")) / name,
                mode=s.get("MONGO_WRITE_MODE"),
                retry_time=s.getfloat("MONGO_RETRY_TIME"),
                ignore_fields=ignored_fields(crawler),
            )
        else:
            store = JsonLinesStore(s.get("ITEMS_DIR"), name, node_id_for(crawler))
        pipeline = cls(
            crawler,
            store,
            batch_size=s.getint("ITEM_STORE_BATCH_SIZE"),
            flush_interval=s.getfloat("ITEM_STORE_FLUSH_INTERVAL"),
            max_pending=s.getint("ITEM_STORE_MAX_PENDING"),
        )
        crawler.signals.connect(pipeline.hurry, signal=signals.backlog_full)
        return pipeline

    def hurry(self) -> None:
        """The node leases no more until its pages are confirmed: what is held
        is written now, and so on until the batch is empty."""
        self._hurry = True
        self._flush()

    async def open_spider(self) -> None:
        report = await maybe_deferred_to_future(threads.deferToThread(self.store.open))
        self._count(report)
        logger.info("items go to %s", self.store.describe())
        self._timer = task.LoopingCall(self._flush_if_old)
        self._timer.start(max(self.flush_interval / 4, 0.05), now=False)

    async def close_spider(self) -> None:
        if self._timer is not None and self._timer.running:
            self._timer.stop()
        self._flush()
        while self._writing is not None:
            await maybe_deferred_to_future(self._writing)
            self._flush()
        report = await maybe_deferred_to_future(threads.deferToThread(self.store.close))
        self._count(report)
        prefix = self.store.stats_prefix
        counts = ", ".join(
            f"{self.stats.get_value(f'{prefix}/{name}', 0)} {name}" for name in COUNTED
        )
        logger.info("item store %s closed: %s", self.store.describe(), counts)

    async def process_item(self, item: Any) -> Any:
        while self._pending >= self.max_pending:
            self.stats.inc_value("item_store/backpressure_waits")
            room: defer.Deferred[None] = defer.Deferred()
            self._room.append(room)
            await maybe_deferred_to_future(room)
        durable: defer.Deferred[None] = defer.Deferred()
        if not self._batch:
            self._batch_started = time.monotonic()
        self._batch.append((self._document(item), durable))
        self._pending += 1
        if len(self._batch) >= self.batch_size:
            self._flush()
        await maybe_deferred_to_future(durable)  # raises DropItem for a rejected item
        return item

    def _document(self, item: Any) -> dict[str, Any]:
        doc = _flat_copy(item)
        if doc is None:
            adapter = ItemAdapter(item)
            try:
                doc = adapter.asdict()
            except RecursionError:
                # Nested too deep to copy: passed on as it is, for the store to reject
                # with the reason (and keep), rather than lost here.
                doc = dict(adapter.items())
        spider = self.crawler.spider
        doc.setdefault("_spider", spider.name if spider else "")
        crawl = crawl_of_item(self.crawler, item)
        if crawl:
            doc.setdefault(CRAWL_FIELD, crawl)
        doc.setdefault("_node", self.node_id)
        for field, moment in times_of(self.crawler, item).items():
            doc.setdefault(field, moment)
        doc.setdefault(FETCHED_AT, dt.datetime.now(dt.UTC))
        key_field = getattr(item, "item_key_field", None)
        if key_field:
            doc[KEY_FIELD] = key_field
        collection = getattr(item, "mongo_collection", None)
        if collection:
            doc["_collection"] = collection
        return doc

    def _flush_if_old(self) -> None:
        if self._batch and time.monotonic() - self._batch_started >= self.flush_interval:
            self._flush()

    def _flush(self) -> None:
        # One write at a time keeps the store's order and bounds the threads used.
        if not self._batch or self._writing is not None:
            return
        batch, self._batch = self._batch[: self.batch_size], self._batch[self.batch_size :]
        if self._batch:
            self._batch_started = time.monotonic()
        self._writing = threads.deferToThread(self.store.write, [doc for doc, _ in batch])
        self._writing.addBoth(self._written, batch)

    def _written(
        self, result: WriteReport | Failure, batch: list[tuple[dict[str, Any], defer.Deferred]]
    ) -> None:
        self._writing = None
        if isinstance(result, Failure):
            # Kept and retried: an item is never dropped because a write failed.
            logger.error(
                "writing %d items failed: %s; retrying in 1s",
                len(batch),
                result.getErrorMessage(),
            )
            self.stats.inc_value("item_store/write_errors")
            self._batch = batch + self._batch
            reactor.callLater(1.0, self._flush)
            return
        self._count(result)
        rejected = dict(result.rejections)
        self._pending -= len(batch)
        for doc, durable in batch:
            reason = rejected.get(id(doc))
            if reason is None:
                durable.callback(None)
            else:
                durable.errback(DropItem(f"the item store cannot take this item: {reason}"))
        while self._room and self._pending < self.max_pending:
            self._room.pop(0).callback(None)
        if not self._batch:
            self._hurry = False
        elif len(self._batch) >= self.batch_size or self._hurry:
            self._flush()

    def _count(self, report: WriteReport | None) -> None:
        if report is None:
            return
        prefix = self.store.stats_prefix
        for name in COUNTED:
            value = getattr(report, name)
            if value:
                self.stats.inc_value(f"{prefix}/{name}", value)
