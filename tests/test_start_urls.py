import json

import pytest
from scrapy import FormRequest

from extensions.exceptions import InvalidStartURL
from extensions.frontier.start_urls import parse_entry


def test_raw_url():
    entry = parse_entry(b"  https://example.com/a?b=1 \n")
    assert entry.url == "https://example.com/a?b=1"
    request = entry.to_request()
    assert request.url == "https://example.com/a?b=1"
    assert request.dont_filter is False


def test_scrapy_redis_json_form():
    raw = json.dumps(
        {"url": "http://example.com/", "meta": {"job": "7"}, "priority": 5, "method": "post",
         "q": "shoes"}
    )  # fmt: skip
    request = parse_entry(raw).to_request()
    assert isinstance(request, FormRequest)
    assert request.method == "POST"
    assert request.meta["job"] == "7"
    assert request.priority == 5
    assert request.body == b"q=shoes"


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"", "empty"),
        (b"not a url", "white space"),
        (
            b"example.com/page",
            "no scheme in 'example.com/page': did you mean 'https://example.com/page'?",
        ),
        (b"example.com:8080/page", "did you mean 'https://example.com:8080/page'?"),
        (b"ftp://example.com/file", "scheme 'ftp'"),
        (b"javascript:alert(1)", "scheme 'javascript'"),
        (b"http:///path-only", "no host"),
        (b"http://example.com:99999/", "malformed"),
        (b"\xff\xfe\x00", "not UTF-8"),
        (b"{bad json", "invalid JSON"),
        (b"[1,2]", "scheme"),
        (b'{"meta": {}}', "no 'url'"),
        (b'{"url": 5}', "no 'url'"),
        (b'{"url": "http://example.com/", "meta": []}', "'meta'"),
        (b'{"url": "http://example.com/", "priority": "high"}', "'priority'"),
        (b'{"url": "mailto:me@example.com"}', "scheme 'mailto'"),
    ],
)
def test_bad_entries_say_why(raw, reason):
    with pytest.raises(InvalidStartURL, match=reason):
        parse_entry(raw)
