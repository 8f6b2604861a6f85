"""Page-level robots in a real crawl: the demo site's /robots-meta/ pages each
say, in a meta tag or an X-Robots-Tag header, for every crawler, another one or
the demo project's own (``crawler``), not to index them or follow their links.
A node on the project's defaults stores and follows what they allow, counts
what they asked, and ``scrapy status`` shows it."""

from __future__ import annotations

import json

from demosite.robotsmeta import NOFOLLOW, NOINDEX, PAGES, PRICE
from tests.conftest import read_items, scrapy, site_hits


def test_pages_that_ask_not_to_be_indexed_or_followed_are_honoured(
    redis_url, redis_client, nodes, demo_site, tmp_path
):
    redis_client.lpush("site:start_urls", demo_site.url + "/robots-meta/")
    nodes.start("site", redis_url, spider_args={"allow": "/robots-meta/"},
                MAX_IDLE_TIME_BEFORE_CLOSE=3)  # fmt: skip
    assert nodes.wait(120) == [0], nodes.tail()
    fetched = {path for path in site_hits(demo_site) if path.startswith("/robots-meta/")}
    followed = {f"/robots-meta/from/{name}" for name in PAGES if name not in NOFOLLOW}
    pages = {f"/robots-meta/{n}" for n in PAGES}
    assert fetched == {"/robots-meta/", "/robots-meta/paid"} | pages | followed
    titles = {item["title"] for item in read_items(tmp_path / "items")}
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
    assert redis_client.hgetall("site:payment_required") == {b"127.0.0.1": b"1"}
    assert nodes.stat(0, "failed/payment_required") == 1
    assert redis_client.hget("site:host:127.0.0.1", "hold") is None
    assert redis_client.hget("site:host:127.0.0.1", "arate") is None
