"""The capture index (``extensions/warc/captures.py``): a capture enters once
published (after its record's sync), a newer one replaces it, Redis's share is
bounded, and a value no node wrote, or bytes that are no record, are no
capture."""

from __future__ import annotations

import json

from extensions.warc.captures import Capture, CaptureIndex, _where, lookup, read_capture
from extensions.warc.files import WarcFiles

PREFIX = "site:warc_captures:"


def test_a_capture_enters_once_published_the_newest_wins_and_the_bound_holds(redis_client):
    index = CaptureIndex(redis_client, PREFIX, 2)
    one, two, three = (f"http://a.test/{n}" for n in (1, 2, 3))
    index.stage(one, "f1.warc.gz", 10, 100, "2026-12-01T00:00:00Z", 200)
    assert lookup(redis_client, PREFIX, one) is None  # its record is not synced yet
    assert index.publish() == 1
    assert lookup(redis_client, PREFIX, one) == Capture(
        one, "f1.warc.gz", 10, 100, "2026-12-01T00:00:00Z", 200
    )
    index.stage(one, "f2.warc.gz", 20, 200, "2026-12-02T00:00:00Z", 404)
    index.stage(two, "f2.warc.gz", 220, 90, "2026-12-02T00:00:00Z", 200)
    assert index.publish() == 2
    assert lookup(redis_client, PREFIX, one).status == 404  # the newest, whatever it was
    assert int(redis_client.get(PREFIX + "count")) == 2  # URLs, not captures
    index.stage(three, "f2.warc.gz", 310, 90, "2026-12-02T00:00:00Z", 200)
    assert index.publish() == 0 and index.not_entered == 1  # past WARC_CAPTURES_IN_REDIS
    assert lookup(redis_client, PREFIX, three) is None


def test_a_value_no_node_wrote_or_bytes_that_are_no_record_are_no_capture(redis_client, tmp_path):
    url = "http://a.test/x"
    sound = {"f": "f.warc.gz", "o": 0, "l": 10, "d": "2026-12-01T00:00:00Z", "s": 200}
    for bad in [b"not json", b"[]", json.dumps({**sound, "f": "../etc/passwd"}),
                json.dumps({**sound, "l": 0}), json.dumps({**sound, "o": -1}),
                json.dumps({**sound, "o": True}), json.dumps({**sound, "s": "200"}),
                json.dumps({k: v for k, v in sound.items() if k != "d"})]:  # fmt: skip
        redis_client.hset(*_where(PREFIX, url), bad)
        assert lookup(redis_client, PREFIX, url) is None, bad
    capture = Capture(url, "f.warc.gz", 0, 10, "2026-12-01T00:00:00Z", 200)
    assert read_capture(b"not a gzip member", capture) is None

    # a record the writer made is read back as its page, its encoding undone
    files = WarcFiles(tmp_path, "site", "n1", max_size=10_000_000)
    head = [("Content-Type", "text/html")]
    records = files.records(url, "GET", [], b"", "200 OK", head, b"<p>x</p>", {"spider": "site"})
    files.write_exchange(records)
    assert files.last_location is not None
    name, offset, length = files.last_location
    files.close()
    with (tmp_path / name).open("rb") as stream:
        stream.seek(offset)
        page = read_capture(stream.read(length), capture)
    assert page is not None and page.body == b"<p>x</p>" and page.status == 200
    assert ("Content-Type", "text/html") in page.headers
