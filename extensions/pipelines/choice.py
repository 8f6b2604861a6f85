"""The stores a node's items go to, built from its settings: the names
``declared.stores_named`` reads (``ITEM_STORES``, ``ITEM_STORE``, else MongoDB
when ``MONGO_URI`` is set and JSON Lines when not), or a project's own store
class named by its path and built with ``from_crawler``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from scrapy.utils.misc import build_from_crawler, load_object

from extensions import connection
from extensions.cluster.checkpoint import node_id_for
from extensions.exceptions import ConfigError
from extensions.keys import SpiderKeys
from extensions.pipelines.declared import (
    STORES,
    stores_named,
    stores_problem,
    stream_key_problem,
)
from extensions.pipelines.stores import ItemStore, JsonLinesStore
from extensions.recrawl.revisits import ignored_fields

if TYPE_CHECKING:
    from scrapy.crawler import Crawler


def stores_for(crawler: Crawler) -> list[ItemStore]:
    settings = crawler.settings
    for name in ("ITEM_STORE", "ITEM_STORES"):
        problem = stores_problem(settings, name)
        if problem:
            raise ConfigError(f"{name}: {problem}")
    return [_build(crawler, name) for name in stores_named(settings)]


def _collection(crawler: Crawler) -> str:
    assert crawler.spidercls is not None
    return getattr(crawler.spidercls, "mongo_collection", None) or crawler.spidercls.name


def _key_field(crawler: Crawler) -> str:
    return getattr(crawler.spidercls, "item_key_field", None) or "url"


def _build(crawler: Crawler, name: str) -> ItemStore:
    s = crawler.settings
    assert crawler.spidercls is not None
    spider = crawler.spidercls.name
    if name not in STORES:
        store: ItemStore = build_from_crawler(load_object(name), crawler)
        return store
    if name == "mongo":
        # imported only when used: pymongo adds a tenth of a second to every start
        from extensions.pipelines.mongo import MongoStore

        return MongoStore(
            s.get("MONGO_URI"),
            s.get("MONGO_DATABASE"),
            _collection(crawler),
            key_field=_key_field(crawler),
            node_id=node_id_for(crawler),
            journal_dir=Path(s.get("MONGO_JOURNAL_DIR")) / spider,
            mode=s.get("MONGO_WRITE_MODE"),
            retry_time=s.getfloat("MONGO_RETRY_TIME"),
            ignore_fields=ignored_fields(crawler),
        )
    if name == "stream":
        from extensions.pipelines.stream import StreamStore

        key = s.get("STREAM_KEY") or ""
        problem = stream_key_problem(s, "STREAM_KEY")
        if problem:
            raise ConfigError(f"STREAM_KEY = {key!r}: {problem}")
        if key:
            ids_key = key + ":ids"
        else:
            keys = SpiderKeys.for_crawler(crawler)
            key, ids_key = keys.named("items_stream"), keys.named("items_stream_ids")
        return StreamStore(
            connection.client_for(crawler),
            key,
            ids_key,
            collection=_collection(crawler),
            key_field=_key_field(crawler),
            maxlen=s.getint("STREAM_MAXLEN"),
            rejected_path=Path(s.get("ITEMS_DIR")) / spider / "rejected.jsonl",
            ignore_fields=ignored_fields(crawler),
        )
    if name == "parquet":
        from extensions.pipelines.parquet.store import ParquetStore

        return ParquetStore(
            crawler,
            where=s.get("PARQUET_URI") or s.get("ITEMS_DIR"),
            collection=_collection(crawler),
            key_field=_key_field(crawler),
            max_size=s.getint("PARQUET_FILE_SIZE"),
            rejected_path=Path(s.get("ITEMS_DIR")) / spider / "rejected.jsonl",
        )
    return JsonLinesStore(s.get("ITEMS_DIR"), spider, node_id_for(crawler))
