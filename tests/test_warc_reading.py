"""Reading WARC files back (``extensions/warc/archive.py``, ``replay.py``) and the
revisit index (``digests.py``): files written by the node's own writer, read as a
reparse reads them."""

from __future__ import annotations

import json
import os
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

from scrapy import Spider

from extensions.warc.archive import Damage, Exchange, Originals, read_exchanges
from extensions.warc.digests import PayloadIndex, payload_digest
from extensions.warc.files import WarcFiles
from extensions.warc.replay import EXCHANGE, ReplaySource
from extensions.warc.storage import LocalArchive


def archive_of(directory: Path, node: str, pages: dict[str, bytes], index, revisit_of=None):
    """A node's file of ``pages`` (URL -> body), revisits where ``index`` (a
    PayloadIndex) knows the payload, synced and entered as the frontier does."""

    files = WarcFiles(directory, "site", node, max_size=10_000_000)
    for url, body in pages.items():
        records = files.records(url, "GET", [("Host", "a.test")], b"", "200 OK",
                                [("Content-Type", "text/html")], body,
                                {"spider": "site", "request": json.dumps({"url": url})},
                                )  # fmt: skip
        head = records[1].rec_headers
        original = index.first(payload_digest(body), url, head.get_header("WARC-Date"),
                               head.get_header("WARC-Record-ID"))  # fmt: skip
        if original:
            records[1] = files.revisit(records[1], payload_digest(body), original)
        files.write_exchange(records)
        index.kept()  # written: entered at the next publish
    files.sync()
    index.publish()
    return files


def test_a_payload_enters_the_index_once_on_disk_and_a_revisit_is_read_from_its_original(
    tmp_path, redis_client
):
    first, second = (PayloadIndex(redis_client, "site:warc_digests:", 1000) for _ in range(2))
    body = b"<html>the same page</html>"
    assert first.first(payload_digest(body), "http://a.test/1", "d", "r") is None
    first.kept()
    # not synced yet: another node does not refer to it, and archives it in full
    assert second.first(payload_digest(body), "http://a.test/9", "d", "r") is None
    first._new.clear(), second._new.clear()

    one = archive_of(tmp_path, "n1", {"http://a.test/1": body, "http://a.test/2": b"<p>2"}, first)
    two = archive_of(tmp_path, "n2", {"http://a.test/3": body}, second)  # a revisit of n1's
    one.close(), two.close()
    found = [e for path in (one.path, two.path) for e in read_exchanges(path)]
    assert [(e.url, e.revisit_of is not None) for e in found] == [
        ("http://a.test/1", False), ("http://a.test/2", False), ("http://a.test/3", True)
    ]  # fmt: skip
    assert all(json.loads(e.fields["request"])["url"] == e.url for e in found)
    archive = LocalArchive(tmp_path)
    (tmp_path / "site-extra-20260101000000-n3-1-00001.warc.gz").write_bytes(b"")  # not site's
    assert archive.names("site") == [one.path.name, two.path.name]
    assert (
        Originals(archive.names("site"), "site", archive.fetch).payload(*found[2].revisit_of)
        == body
    )
    # n1's index lost its lines (a kill before they were written): read from the file
    Path(f"{one.path}.cdxj").write_text("")
    assert (
        Originals(archive.names("site"), "site", archive.fetch).payload(*found[2].revisit_of)
        == body
    )

    # the original was made in the second before its file was opened (a file's first
    # record is made before the file is): still found
    url, date, digest = found[2].revisit_of
    later = datetime.fromisoformat(date.replace("Z", "+00:00")) + timedelta(seconds=1)
    renamed = one.path.with_name(one.path.name.replace(one.path.name.split("-")[1],
                                                       later.strftime("%Y%m%d%H%M%S")))  # fmt: skip
    one.path.rename(renamed)
    assert (
        Originals(archive.names("site"), "site", archive.fetch).payload(url, date, digest) == body
    )
    renamed.rename(one.path)

    # a file cut mid-record is read up to its last whole record, and the rest reported
    data = one.path.read_bytes()
    one.path.write_bytes(data[: len(data) - 40])
    cut = list(read_exchanges(one.path))
    assert [e.url for e in cut if isinstance(e, Exchange)] == ["http://a.test/1"]  # 2: its metadata
    assert isinstance(cut[-1], Damage) and cut[-1].offset > 0
    # garbage is not a WARC file: reported, nothing read
    garbage = tmp_path / "site-20260101000000-x-1-00001.warc.gz"
    garbage.write_bytes(b"not a warc file at all")
    assert [type(e) for e in read_exchanges(garbage)] == [Damage]


def test_a_hostile_archive_costs_only_its_own_records(tmp_path, redis_client):
    class Stats(Counter):
        def inc_value(self, key, count=1):
            self[key] += count

    class Site(Spider):
        name = "site"

        def parse_page(self, response):
            pass

    files = WarcFiles(tmp_path, "site", "n1", max_size=10_000_000)
    pages = {  # URL -> (status, the metadata's fields)
        "http://a.test/ok": ("200 OK", {"spider": "site", "request": json.dumps(
            {"url": "http://a.test/ok", "callback": "parse_page", "meta": {"depth": 2}})}),
        "http://a.test/garbage": ("200 OK", {"spider": "site", "request": "{not json"}),
        "http://a.test/import": ("200 OK", {"spider": "site", "request": json.dumps(
            {"url": "http://a.test/import", "callback": "__init__"})}),
        "http://a.test/other": ("200 OK", {"spider": "shop"}),
        "http://a.test/moved": ("301 Moved", {"spider": "site"}),
        "http://a.test/undated": ("200 OK", {"spider": "site"}),
        "no-scheme/page": ("200 OK", {"spider": "site"}),
    }  # fmt: skip
    for url, (status, fields) in pages.items():
        records = files.records(url, "GET", [], b"", status, [], b"<p>", fields)
        if url.endswith("undated"):
            records[1].rec_headers.replace_header("WARC-Date", "the day before yesterday")
        files.write_exchange(records)
    files.close()
    spider = Site()
    spider.crawler = SimpleNamespace(stats=Stats())
    since = datetime(2000, 1, 1, tzinfo=UTC)  # every date is read
    replayed = ReplaySource(LocalArchive(tmp_path), "site", since=since).requests(spider)
    requests = {request.url.rpartition("/")[2]: request for request in replayed}
    assert set(requests) == {"ok", "garbage", "import"}
    assert requests["ok"].callback == spider.parse_page and requests["ok"].meta["depth"] == 2
    # a request that is not one the frontier writes: the spider's default callback
    assert requests["garbage"].callback is None and requests["import"].callback is None
    assert all(request.meta[EXCHANGE].payload == b"<p>" for request in requests.values())
    stats = spider.crawler.stats
    assert stats["reparse/requests_unreadable"] == 2
    # a date no writer wrote, a URL that is not http(s): skipped, counted, the rest goes on
    assert stats["reparse/skipped/other_spider"] == 1 and stats["reparse/skipped/status"] == 2
    assert stats["reparse/skipped/unreadable"] == 1 and stats["reparse/archived"] == len(pages)


def test_the_digest_index_keeps_its_share_in_redis_and_grows_in_mongodb(redis_client, mongo_db):
    _, _, db = mongo_db
    prefix = "site:warc_digests:"

    def enter(index, n):
        digest = payload_digest(f"page {n}".encode())
        found = index.first(digest, f"http://a.test/{n}", "2026-12-04T00:00:00Z", f"<id:{n}>")
        index.kept()
        index.publish()
        return found

    index = PayloadIndex(redis_client, prefix, 3, db.site_warc_digests)
    assert [enter(index, n) for n in range(6)] == [None] * 6
    buckets = redis_client.scan_iter(prefix + "[0-9a-f]" * 4)
    in_redis = sum(redis_client.hlen(key) for key in buckets)
    assert in_redis == int(redis_client.get(f"{prefix}count")) == 3  # its share, no more
    assert db.site_warc_digests.count_documents({}) == 3  # the rest
    # another node finds a payload in either place; the first record stays the first
    other = PayloadIndex(redis_client, prefix, 3, db.site_warc_digests)
    assert enter(other, 1)["u"] == "http://a.test/1" and enter(other, 5)["r"] == "<id:5>"
    assert db.site_warc_digests.find_one({"_id": payload_digest(b"page 5")})["u"].endswith("/5")
    # without MongoDB, a payload past Redis's share is archived in full, not entered
    alone = PayloadIndex(redis_client, prefix, 3)
    assert enter(alone, 9) is None and alone.not_entered == 1
    assert enter(alone, 9) is None and int(redis_client.get(f"{prefix}count")) == 3


def test_a_write_the_disk_refuses_leaves_no_trace_and_the_next_one_goes_on(tmp_path):
    import resource

    files = WarcFiles(tmp_path, "site", "n1", max_size=10_000_000)
    body = b"<html>" + os.urandom(10_000)  # 10 kB gzip cannot shrink
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    written, refused = 0, 0
    try:  # the disk is "full" at 64 kB: writes past it fail part-way (EFBIG)
        resource.setrlimit(resource.RLIMIT_FSIZE, (64_000, hard))
        for n in range(12):
            records = files.records(f"http://a.test/{n}", "GET", [], b"", "200 OK", [], body,
                                    {"spider": "site"})  # fmt: skip
            try:
                files.write_exchange(records)
                written += 1
            except OSError:
                refused += 1
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert written and refused
    # room again: the next page goes in right after the last whole one
    files.write_exchange(files.records("http://a.test/after", "GET", [], b"", "200 OK", [],
                                       body, {"spider": "site"}))  # fmt: skip
    files.close()
    found = list(read_exchanges(files.path))
    assert not [e for e in found if isinstance(e, Damage)], found
    assert [e.url for e in found][-1] == "http://a.test/after" and len(found) == written + 1
    assert all(e.payload == body for e in found)
