"""The item pipeline that writes items in batches, off the reactor thread.

``process_item`` returns only once the item's batch is durable. That is what
lets the scheduler release a request's lease when the engine is done with it:
by then every item the request produced is in the store.

Batches are written when they reach ``ITEM_STORE_BATCH_SIZE`` items, when their
oldest item is ``ITEM_STORE_FLUSH_INTERVAL`` seconds old, or when no download is
in flight (no more items are coming), one batch at a time in a worker thread.
While ``ITEM_STORE_MAX_PENDING`` items wait, new items wait for room, which
slows the crawl down instead of growing memory.

Items go to the stores ``choice.py`` builds: MongoDB when ``MONGO_URI`` is set
(collection NAME, or the spider's or item class's ``mongo_collection``; unique
key ``url``, or the spider's ``item_key_field``), else JSON Lines files, or
those ``ITEM_STORE`` / ``ITEM_STORES`` name. A batch is durable once every store
has it; a store that fails has it again a second later, the stores it is in
already not. Every document carries ``_spider``, ``_node`` and ``_fetched_at``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import time
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
from extensions.pipelines.choice import stores_for
from extensions.pipelines.documents import COUNTED, KEY_FIELD, WriteReport
from extensions.pipelines.parquet.pages import item_pages
from extensions.pipelines.stores import ItemStore
from extensions.runtime import runtime_of
from extensions.spidermiddlewares.crawlid import CRAWL_FIELD, crawl_of_item

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)
reactor: Any = _reactor  # Twisted types the installed reactor poorly


#: items with the deferreds that fire once they are durable, and their pages
#: (lease members, for a store that takes them: the Parquet store; else b"")
Batch = list[tuple[dict[str, Any], "defer.Deferred[None]", bytes]]
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


@dataclasses.dataclass
class BatchWrite:
    """A batch on its way into every store: those it is in, what each reported."""

    docs: list[dict[str, Any]]
    pages: list[bytes]
    done: set[int] = dataclasses.field(default_factory=set)
    #: (store index, its report), counted on the reactor thread
    reports: list[tuple[int, WriteReport]] = dataclasses.field(default_factory=list)
    #: id of a document -> why a store refused it
    rejected: dict[int, str] = dataclasses.field(default_factory=dict)
    #: the store being written (the one that failed, when the write did)
    failing: int = 0


class ItemStorePipeline:
    def __init__(
        self,
        crawler: Crawler,
        stores: ItemStore | list[ItemStore],
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
        self.stores = stores if isinstance(stores, list) else [stores]
        if not self.stores:
            raise ValueError("an item store pipeline needs a store")
        self.runtime = runtime_of(crawler)
        self.batch_size = batch_size
        self.flush_interval = flush_interval
        self.max_pending = max_pending
        self.node_id = node_id_for(crawler)
        self._pages = item_pages(crawler) if any(_takes_pages(s) for s in self.stores) else None
        self._batch: Batch = []
        self._batch_started = 0.0
        self._writing: defer.Deferred[Any] | None = None
        self._pending = 0
        self._room: list[defer.Deferred[None]] = []
        self._timer: task.LoopingCall | None = None
        #: a batch whose write failed, tried again (in the stores it is not in) at _again_at
        self._again: tuple[Batch, BatchWrite] | None = None
        self._again_at = 0.0
        self._said_at = 0.0
        #: the node waits for this store (signals.backlog_full): write what is held now
        self._hurry = False

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ItemStorePipeline:
        require_addon(crawler.settings, cls.__name__)
        s = crawler.settings
        pipeline = cls(
            crawler,
            stores_for(crawler),
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
        for store in self.stores:
            report = await maybe_deferred_to_future(threads.deferToThread(store.open))
            self._count(store, report)
            logger.info("items go to %s", store.describe())
        self._timer = task.LoopingCall(self._flush_if_old)
        self._timer.start(max(self.flush_interval / 4, 0.05), now=False)

    async def close_spider(self) -> None:
        if self._timer is not None and self._timer.running:
            self._timer.stop()
        self._flush()
        while self._writing is not None or self._again is not None:
            if self._writing is not None:
                await maybe_deferred_to_future(self._writing)
            else:  # a write that failed is tried again in a second, as during the crawl
                await maybe_deferred_to_future(task.deferLater(reactor, 1.0, lambda: None))
            self._flush()
        for store in self.stores:
            report = await maybe_deferred_to_future(threads.deferToThread(store.close))
            self._count(store, report)
            prefix = store.stats_prefix
            counts = ", ".join(
                f"{self.stats.get_value(f'{prefix}/{name}', 0)} {name}" for name in COUNTED
            )
            logger.info("item store %s closed: %s", store.describe(), counts)

    async def process_item(self, item: Any) -> Any:
        while self._pending >= self.max_pending:
            self.stats.inc_value("item_store/backpressure_waits")
            room: defer.Deferred[None] = defer.Deferred()
            self._room.append(room)
            await maybe_deferred_to_future(room)
        durable: defer.Deferred[None] = defer.Deferred()
        if not self._batch:
            self._batch_started = time.monotonic()
        page = self._pages.pop(item) if self._pages is not None else b""
        self._batch.append((self._document(item), durable, page))
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
        if self._batch and (
            time.monotonic() - self._batch_started >= self.flush_interval or self._nothing_coming()
        ):
            self._flush()

    def _nothing_coming(self) -> bool:
        """No download in flight: no more items are on their way to join this
        batch, and waiting out the interval would only hold its pages' leases
        (a crawl at a slow host's pace, an API scrape)."""
        engine = getattr(self.crawler, "engine", None)
        downloader = getattr(engine, "downloader", None)
        return downloader is not None and not downloader.active

    def _flush(self) -> None:
        # One write at a time keeps the stores' order and bounds the threads used.
        if self._writing is not None:
            return
        if self._again is not None:
            if time.monotonic() < self._again_at:
                return
            batch, write = self._again
            self._again = None
        elif self._batch:
            batch, self._batch = self._batch[: self.batch_size], self._batch[self.batch_size :]
            if self._batch:
                self._batch_started = time.monotonic()
            write = BatchWrite([doc for doc, _, _ in batch], [page for _, _, page in batch])
        else:
            return
        self._writing = threads.deferToThread(self._write_all, write)
        self._writing.addBoth(self._written, batch, write)

    def _retry(self) -> None:
        self._again_at = 0.0
        self._flush()

    def _write_all(self, write: BatchWrite) -> None:
        """In the worker thread: the batch into each store it is not yet in."""
        for index, store in enumerate(self.stores):
            if index in write.done:
                continue
            write.failing = index
            if _takes_pages(store):
                report = store.write_pages(write.docs, write.pages)  # type: ignore[attr-defined]
            else:
                report = store.write(write.docs)
            write.reports.append((index, report))
            write.done.add(index)

    def _written(
        self,
        result: Failure | None,
        batch: Batch,
        write: BatchWrite,
    ) -> None:
        self._writing = None
        for index, report in write.reports:
            self._count(self.stores[index], report)
            for doc_id, why in report.rejections:
                write.rejected.setdefault(doc_id, why)
        write.reports.clear()
        if isinstance(result, Failure):
            # Kept and tried again, in the stores it is not in yet: an item is never
            # dropped because a write failed, nor written twice because another did.
            store = self.stores[write.failing]
            problem = f"{store.describe()}: {result.getErrorMessage()}"
            if problem != self.runtime.store_problem or time.monotonic() >= self._said_at + 60:
                # once, and once a minute while it lasts: a retry a second says nothing new
                logger.error("writing %d items to %s; retrying every second", len(batch), problem)
                self._said_at = time.monotonic()
            self.runtime.store_problem = problem
            self.stats.inc_value("item_store/write_errors")
            self._again, self._again_at = (batch, write), time.monotonic() + 1.0
            reactor.callLater(1.0, self._retry)
            return
        if self.runtime.store_problem:
            logger.warning("the item stores take items again")
            self.runtime.store_problem = ""
        self._pending -= len(batch)
        for doc, durable, _ in batch:
            reason = write.rejected.get(id(doc))
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

    def _count(self, store: ItemStore, report: WriteReport | None) -> None:
        if report is None:
            return
        prefix = store.stats_prefix
        for name in COUNTED:
            value = getattr(report, name)
            if value:
                self.stats.inc_value(f"{prefix}/{name}", value)


def _takes_pages(store: ItemStore) -> bool:
    """Whether a store is given each document's page (``write_pages``)."""
    return bool(getattr(store, "takes_pages", False))
