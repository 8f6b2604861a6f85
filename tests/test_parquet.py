"""The Parquet store (``ITEM_STORE = "parquet"``, ``extensions/pipelines/parquet/``):
the crawl's schema on a real Redis (a field's first type holds, whole numbers
widen to double, anything else is refused with the reason); a crawl into local
files read back by pyarrow and DuckDB; a crawl into an S3 server on loopback
(moto's) whose bucket is missing at first, with a node killed -9 mid-crawl:
every page's item once, by its id, once the next node on the killed node's
disk took over its spool."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal

import duckdb
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs
import pyarrow.parquet as pq
import pytest

from demosite import catalog
from extensions.pipelines.documents import item_id
from extensions.pipelines.parquet import publish
from extensions.pipelines.parquet.schema import CrawlSchema, ValueProblem
from extensions.pipelines.parquet.spool import Spool, read_rows
from extensions.warc.storage import s3_client
from servers import services
from tests.conftest import read_items, scrapy
from tests.helpers import seed, wait_for
from tests.test_warc_s3 import bucket as s3_server  # noqa: F401 - a fixture

MOMENT = dt.datetime(2026, 12, 7, 1, 2, 3, 456789, tzinfo=dt.UTC)


def test_a_fields_first_type_holds_whole_numbers_widen_and_other_types_are_refused(
    redis_client,
):
    schema = CrawlSchema(redis_client, "shop:parquet:schema")
    first = {"url": "u", "price": 3, "tags": ["a"], "at": MOMENT, "ok": True, "raw": b"\x00"}
    schema.learn([first])
    assert schema.row(first) == {
        "url": "u", "price": 3, "tags": '["a"]', "ok": True, "raw": "AA==",
        "at": int(MOMENT.timestamp()) * 10**6 + 456789,
    }  # fmt: skip
    # another node sees the types the first one set, from Redis
    other = CrawlSchema(redis_client, "shop:parquet:schema")
    other.learn([{"url": 7}])
    assert other.types["url"] == "string"
    with pytest.raises(ValueProblem, match="field 'url': holds a int64 where the crawl's"):
        other.row({"url": 7})
    # a fractional price widens the field for every node; a whole one is then a double
    other.learn([{"price": 2.5}])
    assert redis_client.hget("shop:parquet:schema", "price") == b"double"
    schema.load()
    assert schema.row({"price": 4}) == {"price": 4.0}
    with pytest.raises(ValueProblem, match="a complex has no Parquet type"):
        schema.row({"odd": 1j})
    with pytest.raises(ValueProblem, match="out of the int64 range"):
        schema.row({"big": 2**64})
    # a type another writer left in the hash that no file can have
    redis_client.hset("shop:parquet:schema", "price", "decimal(9)")
    with pytest.raises(ValueProblem, match="holds types no Parquet file can have"):
        schema.load()


def test_a_segment_is_built_without_the_pages_it_leaves_out_and_a_torn_line(tmp_path):
    spool = Spool(tmp_path / "spool", "shop", "n1")
    spool.open()
    spool.write([(b"g\n1", {"_id": "a", "n": 1}), (b"g\n2", {"_id": "b", "n": 2})], 10**6)
    segment = spool.segments[0]
    with segment.path.open("a") as out:
        out.write('{"p": "g\\n3", "r": {"_id"')  # a kill in the middle of a line
    assert [page for page, _ in read_rows(segment.path)] == ["g\n1", "g\n2"]
    out = tmp_path / "one.parquet"
    rows = publish.build(segment.path, {"n": "int64", "_id": "string"}, ["g\n2"], out)
    table = pq.read_table(out)
    assert rows == 1 and table.column_names == ["_id", "_crawl", "_fetched_at", "n"]
    assert table.to_pylist() == [{"_id": "a", "_crawl": None, "_fetched_at": None, "n": 1}]
    assert spool.finished(b"g\n1") and not spool.finished(b"g\n9")
    spool.close()


def _dataset_rows(files: list[str], filesystem=None) -> list[dict]:
    schemas = [pq.read_schema(f, filesystem=filesystem) for f in files]
    schema = pa.unify_schemas(schemas, promote_options="permissive")
    return (
        ds.dataset(files, schema=schema, format="parquet", filesystem=filesystem)
        .to_table()
        .to_pylist()
    )


@pytest.fixture
def small_shop():
    """A shop of one category (151 pages): a whole crawl, short."""
    site = services.start_demo_site(categories=1)
    yield site
    site.stop()


def test_a_crawl_into_parquet_files_reads_back_with_pyarrow_and_duckdb(
    redis_url, redis_client, small_shop, nodes, tmp_path
):
    seed(redis_url, "shop", small_shop.url + "/")
    nodes.start("shop", redis_url, NODE_ID="n1", ITEM_STORES="jsonl,parquet",
                MAX_IDLE_TIME_BEFORE_CLOSE=2)  # fmt: skip
    assert nodes.wait(180) == [0], nodes.tail()
    stored = read_items(tmp_path / "items")
    assert len(stored) >= 100

    folder = tmp_path / "items" / "shop"
    files = sorted(str(p) for p in folder.glob("*.parquet"))
    assert files, nodes.tail()
    rows = _dataset_rows(files)
    assert sorted(r["url"] for r in rows) == sorted(item["url"] for item in stored)
    assert {r["_id"] for r in rows} == {item_id(item, "url", "shop") for item in stored}
    assert all(isinstance(r["_fetched_at"], dt.datetime) for r in rows)
    assert {r["_node"] for r in rows} == {"n1"}
    con = duckdb.connect()
    count, distinct, products = con.execute(
        "select count(*), count(distinct _id), count(distinct product_id) "
        f"from read_parquet('{folder}/*.parquet', union_by_name=true)"
    ).fetchone()
    assert count == distinct == products == len(stored)
    # the manifest names each file, with its rows; the spool is empty
    records = [json.loads(r) for r in redis_client.hvals("shop:parquet:files")]
    assert sorted(r["file"] for r in records) == sorted(os.path.basename(f) for f in files)
    assert sum(r["rows"] for r in records) == len(stored)
    assert not list((tmp_path / "parquet-spool" / "shop").glob("*/*.rows.jsonl"))
    status = scrapy("status", "shop", "-s", f"REDIS_URL={redis_url}").stdout
    assert f"parquet: {len(files)} files committed, {len(stored)} rows published" in status


@pytest.fixture
def paced_shop():
    """The one-category shop at 10 pages a second for the cluster (its
    Crawl-delay): a node killed after its second file is still mid-crawl."""
    site = services.start_demo_site(categories=1, crawl_delay=0.1)
    yield site
    site.stop()


@pytest.mark.chaos
def test_a_killed_nodes_spool_is_published_once_by_the_next_node_and_a_missing_bucket_holds(
    redis_url,
    redis_client,
    paced_shop,
    nodes,
    tmp_path,
    s3_server,  # noqa: F811
):
    small_shop = paced_shop
    lake = s3_server.replace("s3://warc/", "s3://lake/")  # a bucket nobody made yet
    spools = {name: tmp_path / f"spool-{name}" for name in ("victim", "peer")}

    def settings(name: str) -> dict:
        return {"ITEM_STORES": "jsonl,parquet", "PARQUET_URI": lake,
                "PARQUET_SPOOL_DIR": str(spools[name]), "PARQUET_FILE_SIZE": 4000,
                "MAX_IDLE_TIME_BEFORE_CLOSE": 3, "NODE_ID": name}  # fmt: skip

    seed(redis_url, "shop", small_shop.url + "/")
    victim = nodes.start("shop", redis_url, **settings("victim"))
    nodes.start("shop", redis_url, **settings("peer"))

    def committed(node: str) -> int:
        return sum(json.loads(r)["node"] == node for r in redis_client.hvals("shop:parquet:files"))

    # files are committed, and wait in the spools: S3 has no such bucket
    def uncommitted(node: str) -> bool:
        spooled = {p.name.removesuffix(".rows.jsonl") for p in spools[node].rglob("*.rows.jsonl")}
        return bool(spooled - {k.decode() for k in redis_client.hkeys("shop:parquet:files")})

    # killed with two files committed and rows in one that is not
    wait_for(lambda: committed("victim") >= 2 and uncommitted("victim"), 120, "the commits")
    os.killpg(victim.pid, signal.SIGKILL)  # mid-crawl, its last segment not committed
    victim.wait(10)
    wait_for(lambda: redis_client.hget("shop:node:peer", "parquet_problem"), 60, "the failure")
    status = scrapy("status", "shop", "-s", f"REDIS_URL={redis_url}").stdout
    assert "files wait to be published" in status and "NoSuchBucket" in status, status
    s3_client().create_bucket(Bucket="lake")
    assert nodes.wait(240)[1] == 0, nodes.tail()
    left = list(spools["victim"].rglob("*.rows.jsonl"))
    assert left  # the killed node's committed segments, and its last one
    # the next node started on the killed node's disk publishes what was
    # committed and drops what was not (its pages were fetched again)
    nodes.start("shop", redis_url, **settings("victim"))
    assert nodes.wait(120)[2] == 0, nodes.tail()
    assert not list(spools["victim"].rglob("*.rows.jsonl"))
    assert not list(spools["peer"].rglob("*.rows.jsonl"))  # published once the bucket was
    assert nodes.stat(2, "parquet/orphans_published") >= 2
    # (and dropped what was not: how much is the kill's moment, asserted by no row twice)

    stored = read_items(tmp_path / "items")  # JSON Lines: a killed page's items twice
    pages = {item["url"] for item in stored}
    s3 = pyarrow.fs.S3FileSystem(endpoint_override=os.environ["AWS_ENDPOINT_URL_S3"],
                                 scheme="http", access_key="test", secret_key="test",
                                 region="us-east-1")  # fmt: skip
    files = [f.path for f in s3.get_file_info(pyarrow.fs.FileSelector("lake/crawls/shop"))]
    rows = _dataset_rows(files, s3)
    urls = [r["url"] for r in rows]
    assert len(urls) == len(set(urls)) == len({r["_id"] for r in rows}), "an item twice"
    assert set(urls) == pages
    assert {u.removeprefix(small_shop.url) for u in urls} <= catalog.expected_pages(1)
    # DuckDB reads the same files, fetched from the bucket
    local = tmp_path / "fetched"
    local.mkdir()
    for path in files:
        s3_client().download_file(
            "lake", path.removeprefix("lake/"), str(local / os.path.basename(path))
        )
    count, distinct = (
        duckdb.connect()
        .execute(
            f"select count(*), count(distinct _id) from read_parquet('{local}/*.parquet', "
            "union_by_name=true)"
        )
        .fetchone()
    )
    assert count == distinct == len(pages)


def test_an_item_parquet_cannot_hold_is_rejected_with_the_reason_and_the_rest_spooled(
    redis_url, redis_client, tmp_path
):
    from crawler.spiders.shop import ShopSpider
    from extensions.exceptions import ConfigError
    from extensions.pipelines.choice import stores_for
    from tests.conftest import crawler_with_addon

    with pytest.raises(ConfigError, match=r"PARQUET_URI = 'ftp://x/': a ftp:// URL"):
        crawler_with_addon(ShopSpider, {"ITEM_STORE": "parquet", "PARQUET_URI": "ftp://x/"})
    crawler = crawler_with_addon(ShopSpider, {
        "ITEM_STORE": "parquet", "REDIS_URL": redis_url, "ITEMS_DIR": str(tmp_path / "items"),
        "PARQUET_SPOOL_DIR": str(tmp_path / "spool"),
    })  # fmt: skip
    (store,) = stores_for(crawler)
    store.open()
    good = {"url": "http://shop.test/1", "price": 9.5, "_fetched_at": MOMENT}
    report = store.write_pages(
        [good, {"url": "http://shop.test/2", "price": "cheap"}, {"url": "http://shop.test/3",
         "price": 3.0, "odd": 1j}], [b"g\n1", b"g\n2", b"g\n3"],
    )  # fmt: skip
    assert (report.written, report.rejected) == (1, 2)
    rejected = [json.loads(line) for line in (tmp_path / "items/shop/rejected.jsonl").open()]
    assert [r["reason"] for r in rejected] == [
        "field 'price': holds a string where the crawl's Parquet files have double",
        "field 'odd': a complex has no Parquet type (store it as text or a number)",
    ]
    from extensions.pipelines.parquet.state import parquet_state

    spool = parquet_state(crawler).spool
    assert [row["url"] for _, row in read_rows(spool.segments[0].path)] == [good["url"]]
    spool.close()
