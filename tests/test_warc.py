"""WARC capture (``extensions/warc/``): a crawl of the small shop by two nodes,
one killed with kill -9 mid-crawl, archived into one directory; the files read
back by warcio and by a reader of this test's own (gzip members and WARC
headers, nothing of warcio's)."""

from __future__ import annotations

import gzip
import json
import os
import signal
import zlib
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from warcio.archiveiterator import ArchiveIterator

from extensions.warc.archive import read_exchanges
from extensions.warc.captures import lookup, read_capture
from extensions.warc.files import surt
from tests.conftest import read_items, scrapy
from tests.helpers import SMALL_SHOP_PAGES, page_hits, seed, wait_for


def warcio_records(path: Path) -> tuple[list, bool]:
    """(type, URL, status or a request's Host, payload) of each record warcio reads,
    and whether the file ended cleanly (a file cut by a kill: read up to its last
    whole record)."""
    records = []
    with path.open("rb") as stream:
        try:
            for record in ArchiveIterator(stream):
                http = record.http_headers
                status = http and (http.get_header("Host") if record.rec_type == "request"
                                   else http.get_statuscode())  # fmt: skip
                records.append((record.rec_type, record.rec_headers.get_header("WARC-Target-URI"),
                                status, record.content_stream().read()))  # fmt: skip
        except Exception:  # the cut last record
            return records, False
    return records, True


def own_reader(path: Path) -> list[tuple[str, str]]:
    """(WARC-Type, WARC-Target-URI) of each whole gzip member: another reader."""
    data, found = path.read_bytes(), []
    while data:
        member = zlib.decompressobj(wbits=31)
        try:
            text = member.decompress(data)
        except zlib.error:
            break
        if not member.eof:
            break  # cut short
        data = member.unused_data
        head = text.split(b"\r\n\r\n", 1)[0].decode("utf-8").split("\r\n")
        assert head[0] == "WARC/1.1"
        fields = dict(line.split(": ", 1) for line in head[1:])
        found.append((fields["WARC-Type"], fields.get("WARC-Target-URI", "")))
    return found


def reparsed_from_warc(spider, tmp_path, redis_url, items, site_calls) -> dict[str, bytes]:
    """Reparse what the crawl in ``tmp_path`` archived: asserts the items are the
    crawl's and ``site_calls()`` did not change; path -> each rendered page's DOM."""
    doms = {}
    for path in (tmp_path / "warc").glob(f"{spider}-*.warc.gz"):
        with path.open("rb") as stream:
            for record in ArchiveIterator(stream):
                if record.rec_type == "resource":
                    url = record.rec_headers.get_header("WARC-Target-URI")
                    doms[urlsplit(url).path] = record.content_stream().read()
    before = site_calls()
    reparse_began = datetime.now(UTC)
    shown = scrapy("reparse", spider, "-s", f"WARC_DIR={tmp_path / 'warc'}", "-s",
                   f"REDIS_URL={redis_url}", "-s", f"ITEMS_DIR={tmp_path / 'again'}")  # fmt: skip
    assert shown.returncode == 0, shown.stderr[-3000:]
    assert site_calls() == before
    reparsed = read_items(tmp_path / "again")
    # each item keeps the fetch time of its archived response and says when it was made
    for item in reparsed:
        fetched, made = (datetime.fromisoformat(item[f]) for f in ("_fetched_at", "_reparsed_at"))
        assert fetched < reparse_began <= made, item
    moment = ("_fetched_at", "_reparsed_at", "_node", "fetched_at")
    again = [{k: v for k, v in item.items() if k not in moment} for item in reparsed]
    crawled = [{k: v for k, v in item.items() if k not in moment} for item in items]
    assert sorted(again, key=str) == sorted(crawled, key=str)
    return doms


def test_a_surt_is_the_host_reversed():
    assert surt("https://www.Example.com/A/b?x=1") == "com,example)/a/b?x=1"
    assert surt("http://127.0.0.1:8123/") == "1,0,0,127:8123)/"


def stored(db) -> dict[str, dict]:
    """The shop's items in a database, by URL, less what a fetch's time sets."""
    moment = ("fetched_at", "_fetched_at", "_reparsed_at", "_first_seen", "_changed_at",
              "_updated_at", "_node", "_id")  # fmt: skip
    return {doc["url"]: {k: v for k, v in doc.items() if k not in moment} for doc in db.shop.find()}


@pytest.mark.chaos
def test_every_page_of_a_crawl_is_archived_whatever_dies_and_reparsed_without_a_request(
    redis_url, redis_client, small_shop, nodes, tmp_path, mongo_db
):
    warc = tmp_path / "warc"
    mongo_uri, database, db = mongo_db
    settings = {"WARC_ENABLED": True, "WARC_DIR": str(warc), "MAX_IDLE_TIME_BEFORE_CLOSE": 3,
                "MONGO_URI": mongo_uri, "MONGO_DATABASE": database}  # fmt: skip
    # three URLs of one page the shop never changes: the payload is archived once
    same = [small_shop.url + f"/about?v={n}" for n in range(3)]
    seed(redis_url, "shop", small_shop.url + "/", *same)
    victim = nodes.start("shop", redis_url, NODE_ID="victim", **settings)
    nodes.start("shop", redis_url, NODE_ID="peer", **settings)
    wait_for(lambda: sum(page_hits(small_shop).values()) > 150, 90, "a crawl under way")
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait(10)
    assert nodes.wait(240)[1] == 0, nodes.tail()
    hits = page_hits(small_shop)
    assert set(hits) == SMALL_SHOP_PAGES | {url.removeprefix(small_shop.url) for url in same}

    files = sorted(warc.glob("*.warc.gz"))
    assert {"victim", "peer"} <= {path.name.split("-")[2] for path in files}
    archived: dict[str, int] = {}
    revisits: list[str] = []
    clean = {}
    for path in files:
        records, clean[path.name] = warcio_records(path)
        assert records[0][0] == "warcinfo"
        for kind, url, status, payload in records:
            if kind == "request":  # as sent: the Host header the HTTP client adds too
                assert status == small_shop.url.removeprefix("http://"), status
            if kind == "revisit":
                revisits.append(url)
                assert payload == b""  # the payload is the first record's
            if kind == "response":
                archived[url] = archived.get(url, 0) + 1
                assert status == "200"
                assert url.endswith("/robots.txt") or payload.lstrip().startswith(b"<")
        # the other reader finds the same whole records
        assert [(k, u or "") for k, u, _, _ in records] == own_reader(path)[: len(records)]
    # the three URLs' payload is archived in full at most once a node (a payload
    # enters the shared index once synced: two nodes may both keep it), the rest
    # refer to it (a page the killed node archived and the peer fetched again too)
    assert 1 <= len([url for url in same if url in archived]) <= 2
    assert set(same) <= set(archived) | set(revisits)
    assert len([url for url in revisits if url in same]) >= 1
    pages = {url.removeprefix(small_shop.url) for url in archived | dict.fromkeys(revisits)}
    # every page fetched has a response or revisit record (robots.txt too)
    assert pages >= SMALL_SHOP_PAGES
    peer_files = [path for path in files if "-peer-" in path.name]
    assert all(clean[path.name] for path in peer_files)
    # the index of a file closed cleanly names each response in it, at its offset
    for path in peer_files:
        index = [json.loads(line.split(" ", 2)[2])
                 for line in Path(f"{path}.cdxj").read_text().splitlines()]  # fmt: skip
        indexed = ("response", "revisit")
        responses = [u for k, u, _, _ in warcio_records(path)[0] if k in indexed]
        assert [entry["url"] for entry in index] == responses
    # each page's metadata names its node and the lease it was fetched under
    for found in read_exchanges(peer_files[0]):
        assert found.fields["node"] == "peer" and found.fields["spider"] == "shop"
        leased = not found.url.endswith("/robots.txt")  # robots.txt is no lease's
        assert (len(found.fields["lease"].split(" ")) == 2) == leased, found.fields
        assert ("request" in found.fields) == leased != (found.fields.get("callback") == "none")
    # scrapy warc finds a URL's records across both nodes' files
    shown = scrapy("warc", "shop", "lookup", small_shop.url + "/category/books?page=2",
                   "--json", "-s", f"WARC_DIR={warc}")  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    entries = [json.loads(line) for line in shown.stdout.splitlines()]
    # (its response, and a revisit where the killed node had archived it before the
    # peer fetched it again)
    page = small_shop.url + "/category/books?page=2"
    assert len(entries) == archived[page] + revisits.count(page)
    assert {entry["status"] for entry in entries} == {"200"}
    missing = scrapy(
        "warc", "shop", "lookup", small_shop.url + "/nowhere", "-s", f"WARC_DIR={warc}"
    )
    assert missing.returncode == 1 and "no record of" in missing.stderr
    first = json.loads(Path(f"{peer_files[0]}.cdxj").read_text().splitlines()[0].split(" ", 2)[2])
    with (warc / first["filename"]).open("rb") as stream:
        stream.seek(first["offset"])
        record = gzip.GzipFile(fileobj=stream).read(first["length"])
    assert f"WARC-Target-URI: {first['url']}".encode() in record

    # each URL's newest capture is indexed, read back by its offset (a revisit's from
    # the record of its payload's first fetch, which may be another URL's)
    for url in [*same, page]:
        capture = lookup(redis_client, "shop:warc_captures:", url)
        assert capture is not None and capture.status == 200, url
        with (warc / capture.file).open("rb") as stream:
            stream.seek(capture.offset)
            kept = read_capture(stream.read(capture.length), capture)
        assert kept is not None and kept.body.lstrip().startswith(b"<"), url
        assert (b"A shop that never changes." in kept.body) == (url in same)

    # the callbacks again on what was archived: the same items, not one request
    crawled = stored(db)
    assert len(crawled) == len([p for p in SMALL_SHOP_PAGES if p.startswith("/product/")])
    again = f"{database}_again"
    redis_client.delete("shop:start_urls")
    common = (
        "-s",
        f"WARC_DIR={warc}",
        "-s",
        f"REDIS_URL={redis_url}",
        "-s",
        f"MONGO_URI={mongo_uri}",
    )
    try:
        shown = scrapy("reparse", "shop", *common, "-s", f"MONGO_DATABASE={again}")
        assert shown.returncode == 0, shown.stderr[-3000:]
        assert page_hits(small_shop) == hits  # the site was not asked for anything
        assert stored(db.client[again]) == crawled
        # each keeps its archived fetch's time, before the reparse that made it
        for doc in db.client[again].shop.find():
            assert doc["_fetched_at"] < doc["_reparsed_at"], doc
        # revisits (a payload archived before) are reparsed from the record they refer to
        assert "revisits_unresolved" not in shown.stderr
        assert "links pushed" in shown.stderr and redis_client.llen("shop:start_urls") == 0
        # with --follow the links found go to the start list, for the nodes to fetch
        shown = scrapy("reparse", "shop", "--follow", "--since", "2000-01-01", *common,
                       "-s", f"MONGO_DATABASE={again}")  # fmt: skip
        assert shown.returncode == 0, shown.stderr[-3000:]
        assert redis_client.llen("shop:start_urls") > len(crawled)
        assert page_hits(small_shop) == hits
        # a crawl id no page had: nothing taken
        shown = scrapy("reparse", "shop", "--crawl", "other", *common, "-s",
                       f"MONGO_DATABASE={again}_none")  # fmt: skip
        assert shown.returncode == 0 and "reparsed 0 responses" in shown.stderr, shown.stderr
    finally:
        for name in (again, f"{again}_none"):
            db.client.drop_database(name)


def test_what_was_written_is_on_disk_after_a_sync_and_a_file_rotates_at_its_size(tmp_path):
    from extensions.warc.files import WarcFiles

    files = WarcFiles(tmp_path, "site", "n1", max_size=1_000_000)  # the smallest allowed
    body = b"<html>" + os.urandom(600_000)  # 600 kB that gzip cannot shrink: two fill a file
    for n in range(3):
        url = f"http://a.test/{n}"
        records = files.records(url, "GET", [("Host", "a.test")], b"", "200 OK",
                                [("Content-Type", "text/html")], body, {"node": "n1"})  # fmt: skip
        files.write_exchange(records)
        files.sync()  # what the frontier does before it releases the page's lease
        # read while the file is still open for writing: every record is there
        kinds = [kind for kind, *_ in warcio_records(files.path)[0]]
        assert kinds.count("response") == [1, 2, 1][n]
    assert len(list(tmp_path.glob("*.warc.gz"))) == 2  # rotated past 1 MB
    assert [kind for kind, *_ in warcio_records(files.path)[0]] == [
        "warcinfo", "request", "response", "metadata"
    ]  # fmt: skip
    files.close()


@pytest.mark.chaos
def test_a_node_whose_disk_is_full_archives_nothing_half_and_loses_no_page(
    redis_url, small_shop, nodes, tmp_path
):
    from extensions.warc.archive import Damage

    warc = tmp_path / "warc"
    settings = {"WARC_ENABLED": True, "WARC_DIR": str(warc), "MAX_IDLE_TIME_BEFORE_CLOSE": 3}
    seed(redis_url, "shop", small_shop.url + "/")
    # its WARC file fills at 256 kB: about a hundred pages, then writes fail
    nodes.start("shop", redis_url, NODE_ID="small", runner="tests.small_disk", **settings)
    wait_for(lambda: "cannot write" in nodes.log(0), 90, "the small node's disk full")

    def held_back() -> bool:
        shown = scrapy("status", "shop", "-s", f"REDIS_URL={redis_url}").stdout
        return "held back: WARC_DIR takes no writes" in shown

    wait_for(held_back, 60, "scrapy status saying the small node is held back")
    nodes.start("shop", redis_url, NODE_ID="roomy", **settings)
    assert nodes.wait(240) == [0, 0], nodes.tail()
    assert nodes.stat(0, "warc/write_errors") >= 1 and nodes.stat(0, "warc/parked") >= 1
    # every page was archived whole by one node or the other, and every file,
    # the small node's too, reads to its end: a failed write left nothing behind
    archived = set()
    for path in warc.glob("*.warc.gz"):
        for found in read_exchanges(path):
            assert not isinstance(found, Damage), found
            archived.add(found.url.removeprefix(small_shop.url))
    assert archived >= SMALL_SHOP_PAGES
    # a page sent back was parsed once, after it was archived: each item once
    items = [item["url"] for item in read_items(tmp_path / "items")]
    assert len(items) == len(set(items)) == len([p for p in SMALL_SHOP_PAGES if "/product/" in p])
