"""Item stores, declared (``extensions/capability.py``): which stores a node writes
its items to, and the Redis stream's settings and keys. How: ``choice.py`` (the
stores named), ``itemstore.py`` (the pipeline, every store before a lease goes),
``stream.py`` (the Redis stream)."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

from extensions.capability import Capability, Key, Setting
from extensions.settingchecks import number

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

#: the stores a name picks; a class path (with ``from_crawler``) picks a project's own
STORES = ("mongo", "jsonl", "stream", "parquet")


def stores_named(settings: BaseSettings) -> list[str]:
    """The stores the settings pick, in order: ITEM_STORES, else ITEM_STORE, else
    MongoDB when MONGO_URI is set and JSON Lines when not."""
    many = settings.get("ITEM_STORES")
    if many:
        if isinstance(many, str):  # from the command line: a,b or a JSON list
            if many.lstrip().startswith("["):
                try:
                    parsed = json.loads(many)
                except ValueError:
                    return [many]
                return list(parsed) if isinstance(parsed, list) else [many]
            return [name.strip() for name in many.split(",") if name.strip()]
        return list(many)
    one = settings.get("ITEM_STORE")
    if one:
        return [one]
    return ["mongo" if settings.get("MONGO_URI") else "jsonl"]


def stores_problem(settings: BaseSettings, name: str) -> str | None:
    if settings.get("ITEM_STORE") and settings.get("ITEM_STORES"):
        return "set ITEM_STORE or ITEM_STORES, not both" if name == "ITEM_STORES" else None
    value = settings.get(name)
    if not value:
        return None
    if name == "ITEM_STORE" and not isinstance(value, str):
        return f"must be a store's name ({', '.join(STORES)}) or a class path, not {value!r:.80}"
    named = stores_named(settings)
    if not all(isinstance(store, str) and store for store in named):
        return f"must name stores ({', '.join(STORES)}) or class paths, not {value!r:.80}"
    if len(set(named)) != len(named):
        return f"names a store twice: {named!r:.120}"
    for store in named:
        if store not in STORES and "." not in store:
            return (
                f"{store!r} is no store: one of {', '.join(STORES)}, or the path of a class "
                "with from_crawler (a project's own)"
            )
        if store == "mongo" and not settings.get("MONGO_URI"):
            return "the mongo store needs MONGO_URI"
    return None


def stream_key_problem(settings: BaseSettings, name: str) -> str | None:
    key = settings.get(name) or ""
    if not isinstance(key, str):
        return "must be a Redis key"
    if key and settings.getbool("REDIS_CLUSTER") and not re.search(r"\{[^}]+\}", key):
        return (
            "with REDIS_CLUSTER, the key needs a hash tag ({...}) so that its ids hash "
            "(STREAM_KEY:ids) shares its slot"
        )
    return None


def parquet_uri_problem(settings: BaseSettings, name: str) -> str | None:
    where = settings.get(name) or ""
    if not isinstance(where, str):
        return "must be a directory or s3://BUCKET/PREFIX"
    if "://" not in where:
        return None
    scheme, _, rest = where.partition("://")
    if scheme != "s3":
        return f"a {scheme}:// URL; a directory or s3://BUCKET/PREFIX is needed"
    if not rest.split("/")[0]:
        return "names no bucket (s3://BUCKET/PREFIX)"
    return None


CAPABILITY = Capability(
    name="item stores",
    about="where items go: MongoDB, JSON Lines, a Redis stream, Parquet files, several "
    "at once (extensions/pipelines/)",
    settings={
        "ITEM_STORE": Setting(
            "",
            'the store items go to: "mongo", "jsonl", "stream", "parquet" or a class path (a '
            "project's own, built with from_crawler); empty: MongoDB when MONGO_URI is "
            "set, else JSON Lines",
            stores_problem,
        ),
        "ITEM_STORES": Setting(
            [],
            'several stores at once, e.g. ["mongo", "stream"]: a page\'s items are in '
            "every one before its lease is released",
            stores_problem,
        ),
        "STREAM_KEY": Setting(
            "",
            "the Redis stream the stream store adds items to (empty: NAME:items, in the "
            "crawl's Redis); with REDIS_CLUSTER, a key with a hash tag",
            stream_key_problem,
        ),
        "STREAM_MAXLEN": Setting(
            100_000,
            "items the stream keeps: the oldest are trimmed past it (consumers read "
            "sooner), and with them what the stream knows of their ids",
            number(int, 1),
        ),
        "PARQUET_URI": Setting(
            "",
            "where the Parquet store's files go: a directory (files in DIR/SPIDER/) or "
            "s3://BUCKET/PREFIX (PREFIX/SPIDER/); empty: ITEMS_DIR",
            parquet_uri_problem,
        ),
        "PARQUET_SPOOL_DIR": Setting(
            "data/parquet-spool",
            "the node's own disk: rows wait here (synced) until their file is committed "
            "and published; a killed node's spool is taken over by the next node on it",
        ),
        "PARQUET_FILE_SIZE": Setting(
            64_000_000,
            "bytes of spooled rows a Parquet file is made of at most (the file itself is "
            "several times smaller)",
            number(int, 1000),
        ),
        "PARQUET_ROLL_INTERVAL": Setting(
            60.0,
            "seconds a node spools rows before it makes them a file (sooner when it is "
            "idle or closing): its pages' leases wait for that file",
            number(float, 0.1),
        ),
    },
    keys={
        "items_stream": Key(
            "%(name)s:items",
            "stream",
            'the stream store (ITEM_STORE "stream"): an entry per item new or changed, '
            "fields _id (the item's id), item (its JSON), collection (when the item "
            "names one); at most STREAM_MAXLEN entries",
            "pipelines/stream.py (each node, a batch at a time)",
        ),
        "items_stream_ids": Key(
            "%(name)s:items:ids",
            "hash",
            "item id -> the digest of its fields and its stream entry, for the items "
            "the stream holds: an item stored again unchanged (a page fetched twice) "
            "is not added again",
            "pipelines/stream.py",
        ),
        "parquet_files": Key(
            "%(name)s:parquet:files",
            "hash",
            "the Parquet store's manifest: segment id -> JSON {file, node, committed_at, "
            "leave_out, rows, published}; a segment is committed here in the transaction "
            "that releases its pages' leases, published after",
            "pipelines/parquet/part.py (each node)",
        ),
        "parquet_schema": Key(
            "%(name)s:parquet:schema",
            "hash",
            "field -> its type in the crawl's Parquet files (string, int64, double, bool, "
            "timestamp, binary, json), set by the first value stored in it",
            "pipelines/parquet/schema.py (each node)",
        ),
    },
    frontier_parts={"extensions.pipelines.parquet.part.ParquetPart": 750},
    spider_middlewares={"extensions.pipelines.parquet.pages.ItemPagesMiddleware": 20},
)
