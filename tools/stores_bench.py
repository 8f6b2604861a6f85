"""``make bench`` section 34: the item stores, each as the pipeline's worker thread
drives it (batches of 500), against what a user would write instead.

* Items per second into JSON Lines (``JsonLinesStore``, fsync'ed per batch)
  against Scrapy's own ``JsonLinesItemExporter`` (a feed export, no fsync);
  into the Redis stream (``StreamStore``: each item once by its id) against
  stock scrapy-redis's ``RedisPipeline`` (an RPUSH of each item's JSON, no id,
  no dedup); into Parquet (``ParquetStore``: rows spooled, fsync'ed per batch,
  then the segment built into a file by pyarrow; the rate counts both). MongoDB's
  store is section 6's.
* Bytes per item where it is kept: the JSON Lines file, the Parquet file (zstd),
  and what Redis holds for the stream and its ids (``MEMORY USAGE``), against
  scrapy-redis's list.
* Two kinds of item: the demo shop's product (a few short fields) and a
  document of one of Python's pages (``build_document``, about 39 KB; skipped
  without Debian's python3-doc).
"""

from __future__ import annotations

import datetime as dt
import io
import time
import uuid
from pathlib import Path
from typing import Any

ITEMS = 20_000  # shop items per store
DOCUMENTS = 300  # documents (Python's pages) per store
BATCH = 500


def shop_items(count: int) -> list[dict[str, Any]]:
    now = dt.datetime.now(dt.UTC)
    return [
        {
            "url": f"http://shop.test/product/{n}",
            "name": f"Product {n}",
            "price": f"{n % 97}.99",
            "category": ("books", "music", "games")[n % 3],
            "in_stock": n % 5 != 0,
            "description": "A fine product of the demo shop, " * 4,
            "_spider": "shop",
            "_node": "bench",
            "_fetched_at": now,
        }
        for n in range(count)
    ]


def documents(count: int) -> list[dict[str, Any]]:
    """Python's first ``count`` pages as the documents section 33 measures."""
    from scrapy.http import HtmlResponse, Request

    from extensions.documents.extract import build_document
    from tools.documents_bench import pages

    made = []
    for url, html in pages()[:count]:
        response = HtmlResponse(url, body=html.encode(), encoding="utf-8", request=Request(url))
        made.append({**build_document(response), "_spider": "site", "_node": "bench",
                     "_fetched_at": dt.datetime.now(dt.UTC)})  # fmt: skip
    return made


def _batches(items: list[dict[str, Any]]):
    for start in range(0, len(items), BATCH):
        yield [dict(item) for item in items[start : start + BATCH]]


def _timed(write, items: list[dict[str, Any]]) -> float:
    began = time.perf_counter()
    for batch in _batches(items):
        write(batch)
    return len(items) / (time.perf_counter() - began)


def jsonl(items: list[dict[str, Any]], work: Path) -> dict[str, float]:
    from extensions.pipelines.stores import JsonLinesStore

    store = JsonLinesStore(work, "bench", uuid.uuid4().hex[:8])
    store.open()
    rate = _timed(store.write, items)
    store.close()
    return {"rate": rate, "bytes": store.path.stat().st_size / len(items)}


def feed_export(items: list[dict[str, Any]], work: Path) -> dict[str, float]:
    from scrapy.exporters import JsonLinesItemExporter

    path = work / f"feed-{uuid.uuid4().hex[:8]}.jsonl"
    with path.open("wb") as out:
        exporter = JsonLinesItemExporter(out)
        exporter.start_exporting()
        began = time.perf_counter()
        for batch in _batches(items):
            for item in batch:
                exporter.export_item(item)
        exporter.finish_exporting()
        rate = len(items) / (time.perf_counter() - began)
    return {"rate": rate, "bytes": path.stat().st_size / len(items)}


def stream(items: list[dict[str, Any]], redis_url: str) -> dict[str, float]:
    from extensions.pipelines.stream import StreamStore
    from servers.clients import redis_at

    client = redis_at(redis_url)
    key = f"bench{uuid.uuid4().hex[:6]}:items"
    store = StreamStore(client, key, key + ":ids", collection="bench", maxlen=len(items) + 1,
                        rejected_path=Path("/dev/null"))  # fmt: skip
    rate = _timed(store.write, items)
    held = sum(int(client.memory_usage(k, samples=0) or 0) for k in (key, key + ":ids"))
    again = _timed(store.write, items)  # every page fetched twice: nothing added
    assert client.xlen(key) == len(items)
    client.delete(key, key + ":ids")
    client.close()
    return {"rate": rate, "bytes": held / len(items), "again": again}


def scrapy_redis(items: list[dict[str, Any]], redis_url: str) -> dict[str, float]:
    from scrapy_redis.pipelines import RedisPipeline

    from servers.clients import redis_at

    client = redis_at(redis_url)
    key = f"bench{uuid.uuid4().hex[:6]}:items"
    pipeline = RedisPipeline(client, key=key)
    spider = type("Spider", (), {"name": "bench"})()

    def write(batch: list[dict[str, Any]]) -> None:
        for item in batch:  # its process_item runs this in a thread, an item at a time
            pipeline._process_item(item, spider)

    rate = _timed(write, items)
    held = int(client.memory_usage(key, samples=0) or 0)
    client.delete(key)
    client.close()
    return {"rate": rate, "bytes": held / len(items)}


def parquet(items: list[dict[str, Any]], redis_url: str, work: Path) -> dict[str, float]:
    from scrapy import Spider
    from scrapy.utils.test import get_crawler

    from extensions.pipelines.parquet import publish
    from extensions.pipelines.parquet.state import parquet_state
    from extensions.pipelines.parquet.store import ParquetStore

    name = f"bench{uuid.uuid4().hex[:6]}"
    spider = type("BenchSpider", (Spider,), {"name": name})
    settings = {"REDIS_URL": redis_url, "PARQUET_SPOOL_DIR": str(work / "spool"),
                "ADDONS": {"extensions.addon.DistributedAddon": 0}}  # fmt: skip
    crawler = get_crawler(spider, settings)
    crawler._apply_settings()
    store = ParquetStore(crawler, where=str(work), collection=name, key_field="url",
                         max_size=10**12, rejected_path=work / "rejected.jsonl")  # fmt: skip
    store.open()
    state = parquet_state(crawler)
    pages = iter(range(len(items)))
    began = time.perf_counter()
    for batch in _batches(items):
        store.write_pages(batch, [f"g\n{next(pages)}".encode() for _ in batch])
    segment = state.spool.segments[0]
    built = work / f"{name}.parquet"
    publish.build(segment.path, state.schema.types, (), built)
    rate = len(items) / (time.perf_counter() - began)
    size = built.stat().st_size
    state.schema.server.delete(state.schema.key)
    state.spool.done(segment)
    state.spool.close()
    built.unlink()
    return {"rate": rate, "bytes": size / len(items)}


def measure(redis_url: str, work: Path) -> dict[str, Any]:
    from servers.nginx import PYTHON_DOCS

    work.mkdir(parents=True, exist_ok=True)
    kinds = {"shop items": shop_items(ITEMS)}
    if PYTHON_DOCS.is_dir():
        kinds["documents (Python's pages)"] = documents(DOCUMENTS)
    result: dict[str, Any] = {}
    for kind, items in kinds.items():
        figures = {
            "Scrapy's feed export (JSON lines)": feed_export(items, work),
            "this project, JSON Lines": jsonl(items, work),
            "stock scrapy-redis RedisPipeline (a list)": scrapy_redis(items, redis_url),
            "this project, the Redis stream": stream(items, redis_url),
            "this project, Parquet (spooled, then built)": parquet(items, redis_url, work),
        }
        result[kind] = {"items": len(items), "figures": figures}
    return result


def report(result: dict[str, Any]) -> None:
    out = io.StringIO()
    for kind, found in result.items():
        out.write(f"   {kind}, {found['items']:,} of them, batches of {BATCH}\n")
        out.write(f"   {'store':48s} {'items/s':>9s} {'bytes/item':>11s}\n")
        for name, figures in found["figures"].items():
            size = f"{figures['bytes']:11,.0f}" if "bytes" in figures else f"{'-':>11s}"
            out.write(f"   {name:48s} {figures['rate']:9,.0f} {size}\n")
            if "again" in figures:
                out.write(f"   {'  the same items again (nothing added)':48s} "
                          f"{figures['again']:9,.0f}\n")  # fmt: skip
    print(out.getvalue().rstrip())
