"""WARC capture into S3 (``WARC_DIR = "s3://BUCKET/PREFIX"``, ``extensions/warc/storage.py``),
against moto's S3-compatible server on loopback: files spooled on each node's
disk, uploaded when closed, and a killed node's spool uploaded by the next node
started on it; ``scrapy warc lookup`` and ``scrapy reparse`` read the bucket."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from extensions.warc.archive import Damage, read_exchanges
from extensions.warc.storage import S3Archive, s3_client
from servers import services
from tests.conftest import read_items, scrapy
from tests.helpers import SMALL_SHOP_PAGES, page_hits, seed, wait_for


@pytest.fixture
def bucket(monkeypatch, tmp_path):
    """An S3-compatible server (moto's) with an empty bucket ``warc``; the AWS
    variables every process started by the test reads."""
    port = services.free_port()
    with (tmp_path / "moto.log").open("wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1",
                                 "-p", str(port)], stdout=log, stderr=log)  # fmt: skip
    try:
        services.wait_for_port(port, 30, "moto's S3 server", proc)
        for name, value in {"AWS_ENDPOINT_URL_S3": f"http://127.0.0.1:{port}",
                            "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
                            "AWS_DEFAULT_REGION": "us-east-1"}.items():  # fmt: skip
            monkeypatch.setenv(name, value)
        s3_client().create_bucket(Bucket="warc")
        yield "s3://warc/crawls"
    finally:
        services.stop(proc)


@pytest.mark.chaos
def test_a_crawl_archived_into_s3_loses_nothing_to_a_kill_and_is_reparsed_from_there(
    redis_url, small_shop, nodes, tmp_path, bucket
):
    spool = {name: tmp_path / f"spool-{name}" for name in ("victim", "peer")}

    def settings(name: str) -> dict:
        return {"WARC_ENABLED": True, "WARC_DIR": bucket, "WARC_SPOOL_DIR": str(spool[name]),
                "MAX_IDLE_TIME_BEFORE_CLOSE": 3, "NODE_ID": name}  # fmt: skip

    seed(redis_url, "shop", small_shop.url + "/")
    victim = nodes.start("shop", redis_url, **settings("victim"))
    nodes.start("shop", redis_url, **settings("peer"))
    wait_for(lambda: sum(page_hits(small_shop).values()) > 150, 90, "a crawl under way")
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait(10)
    assert nodes.wait(240)[1] == 0, nodes.tail()
    assert list(spool["peer"].iterdir()) == []  # uploaded when it stopped
    left = sorted(path.name for path in spool["victim"].iterdir())
    assert left and all("-victim-" in name for name in left)  # the killed node's spool
    # the next node started on that spool uploads what it holds first
    nodes.start("shop", redis_url, **settings("victim"))
    assert nodes.wait(120)[2] == 0, nodes.tail()
    assert list(spool["victim"].iterdir()) == []

    archive = S3Archive(bucket, tmp_path / "unused")
    try:
        names = archive.names("shop")
        assert {name.split("-")[2] for name in names} == {"victim", "peer"}
        assert set(names) | {f"{name}.cdxj" for name in names} >= set(left)
        archived = set()
        for name in names:
            path = archive.fetch(name)
            for found in read_exchanges(path):
                if not isinstance(found, Damage):  # the killed node's cut last record
                    archived.add(found.url.removeprefix(small_shop.url))
        assert archived >= SMALL_SHOP_PAGES
    finally:
        archive.close()

    url = small_shop.url + "/category/books?page=2"
    shown = scrapy("warc", "shop", "lookup", url, "--json", "-s", f"WARC_DIR={bucket}")
    assert shown.returncode == 0 and json.loads(shown.stdout.splitlines()[0])["url"] == url
    hits = page_hits(small_shop)
    shown = scrapy("reparse", "shop", "-s", f"WARC_DIR={bucket}", "-s", f"REDIS_URL={redis_url}",
                   "-s", f"ITEMS_DIR={tmp_path / 'again'}")  # fmt: skip
    assert shown.returncode == 0, shown.stderr[-3000:]
    assert page_hits(small_shop) == hits

    def by_url(items: list[dict]) -> dict[str, dict]:
        return {item["url"]: {k: v for k, v in item.items() if not k.startswith(("_", "fetched"))}
                for item in items}  # fmt: skip

    assert by_url(read_items(tmp_path / "again")) == by_url(read_items(tmp_path / "items"))


@pytest.mark.spawns
def test_a_spool_gives_up_the_files_of_writers_that_are_gone(bucket, tmp_path):
    spool = tmp_path / "spool"
    spool.mkdir()
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    writers = {"gone": int(gone.stdout), "alive": os.getppid(), "restarted": os.getpid()}
    for name, pid in writers.items():  # the last: a former process with this one's pid
        (spool / f"shop-20261204000000-{name}-{pid}-00001.warc.gz").write_bytes(b"x")
    archive = S3Archive(bucket, spool)
    assert archive.leftovers("shop") == 2
    assert [path.name.split("-")[2] for path in spool.iterdir()] == ["alive"]
    assert {name.split("-")[2] for name in archive.names("shop")} == {"gone", "restarted"}
