"""The Redis dupefilter on its own, as used with Scrapy's default scheduler."""

from scrapy import Request
from scrapy.utils.request import RequestFingerprinter

from extensions.frontier.dupefilter import RedisDupeFilter


def test_request_seen_uses_scrapys_fingerprints(redis_client):
    dupefilter = RedisDupeFilter(redis_client, "t:dupefilter", RequestFingerprinter())
    assert dupefilter.request_seen(Request("https://example.com/a?x=1&y=2")) is False
    # Scrapy's fingerprinter canonicalises the URL: same request, another spelling.
    assert dupefilter.request_seen(Request("https://example.com/a?y=2&x=1")) is True
    assert dupefilter.request_seen(Request("https://example.com/b")) is False
    assert int(redis_client.hget("t:dupefilter", "n")) == 2
