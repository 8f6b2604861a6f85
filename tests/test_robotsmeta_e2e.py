"""Page-level robots in a real crawl: the demo site's /robots-meta/ pages each
say, in a meta tag or an X-Robots-Tag header, for every crawler, another one or
the demo project's own (``crawler``), not to index them or follow their links.
A node on the project's defaults stores and follows what they allow, counts
what they asked, and ``scrapy status`` shows it."""

from __future__ import annotations

import json

from demosite.robotsmeta import NOFOLLOW, NOINDEX, PAGES, PRICE
from servers import services
from tests.conftest import read_items, scrapy, site_hits


def test_pages_that_ask_not_to_be_indexed_or_followed_are_honoured(
    redis_url, redis_client, nodes, demo_site, tmp_path
):
    """The site is signals.test (a DNS server the test runs answers), whose
    robots.txt states what its content may be used for."""
    zone, log = tmp_path / "zone.json", tmp_path / "queries.log"
    zone.write_text(json.dumps({"signals.test": {"a": ["127.0.0.1"], "ttl": 300}}))
    log.write_text("")
    dns = services.start_dns_server(zone, log)
    site = demo_site.url.replace("127.0.0.1", "signals.test")
    try:
        redis_client.lpush("site:start_urls", site + "/robots-meta/")
        nodes.start("site", redis_url, spider_args={"allow": "/robots-meta/"},
                    MAX_IDLE_TIME_BEFORE_CLOSE=3, DNS_SHARED=True, DNS_SERVERS=dns.url)  # fmt: skip
        assert nodes.wait(120) == [0], nodes.tail()
    finally:
        dns.stop()
    fetched = {path for path in site_hits(demo_site) if path.startswith("/robots-meta/")}
    followed = {f"/robots-meta/from/{name}" for name in PAGES if name not in NOFOLLOW}
    pages = {f"/robots-meta/{n}" for n in PAGES}
    assert fetched == {"/robots-meta/", "/robots-meta/paid"} | pages | followed
    items = read_items(tmp_path / "items")
    titles = {item["title"] for item in items}
    stored = {f"Says {name}" for name in PAGES if name not in NOINDEX}
    assert titles == {"Robots meta"} | stored | {f"From {n}" for n in PAGES if n not in NOFOLLOW}
    assert nodes.stat(0, "robots/noindex_pages") == len(NOINDEX)
    assert nodes.stat(0, "robots/nofollow_pages") == len(NOFOLLOW)
    assert nodes.stat(0, "robots/items_dropped") == len(NOINDEX)
    shown = scrapy("status", "site", "-s", f"REDIS_URL={redis_url}")
    assert f"pages that asked: noindex {len(NOINDEX)}   nofollow {len(NOFOLLOW)}" in shown.stdout
    status = json.loads(scrapy("status", "site", "--json", "-s", f"REDIS_URL={redis_url}").stdout)
    assert (status["noindex"], status["nofollow"]) == (len(NOINDEX), len(NOFOLLOW))

    # a page that wants paying for: asked once, dead-lettered with its price, counted
    # for its host, which is not slowed for it
    assert site_hits(demo_site)["/robots-meta/paid"] == 1
    [letter] = [json.loads(raw) for raw in redis_client.lrange("site:dlq", 0, -1)]
    assert letter["kind"] == "payment_required" and letter["status"] == 402
    assert f"Crawler-Price: {PRICE}" in letter["error"], letter
    assert redis_client.hgetall("site:payment_required") == {b"signals.test": b"1"}
    assert nodes.stat(0, "failed/payment_required") == 1
    assert redis_client.hget("site:host:signals.test", "hold") is None
    assert redis_client.hget("site:host:signals.test", "arate") is None

    # every item carries what the site's robots.txt says of its URL (its
    # Content-Usage rule by the longest path); a page's own header says more, and
    # a refusal wins
    site_usage = {"search": "yes", "ai-input": "no"}
    for item in items:
        path = item["url"].removeprefix(site)
        if path == "/robots-meta/from/rel":
            more = {"train-ai": "y"}
        elif path.startswith("/robots-meta/from/"):
            more = {"train-ai": "y", "train-genai": "n"}
        else:
            more = {"train-ai": "n"}
        if item["title"] == "Says rel":  # its header: train-ai=n;reason="...", search=n
            more = {**more, "search": "n"}
        assert item["_usage"] == {**site_usage, **more}, item
