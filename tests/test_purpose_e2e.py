"""A crawl that says it gathers training data, on the demo site's /robots-meta/
pages under a name that starts with ``signals.``: its robots.txt refuses
training everywhere (``Content-Usage: train-ai=n``) but under
``/robots-meta/from/`` (``train-ai=y``). A second crawl of the same pages, under
an id whose purpose is ``none``, stores everything the page-level robots allow."""

from __future__ import annotations

import json

from demosite.robotsmeta import NOFOLLOW, NOINDEX, PAGES
from servers import services
from tests.conftest import read_items, scrapy, site_hits


def test_a_training_crawl_stores_only_what_the_sites_allow_and_says_what_they_refused(
    redis_url, redis_client, nodes, demo_site, tmp_path
):
    zone, log = tmp_path / "zone.json", tmp_path / "queries.log"
    zone.write_text(json.dumps({"signals.test": {"a": ["127.0.0.1"], "ttl": 300}}))
    log.write_text("")
    dns = services.start_dns_server(zone, log)
    site = demo_site.url.replace("127.0.0.1", "signals.test")
    seeded = scrapy("seed", "site", "--crawl", "everything", "--purpose", "none",
                    site + "/robots-meta/", "-s", f"REDIS_URL={redis_url}")  # fmt: skip
    assert seeded.returncode == 0, seeded.stderr
    try:
        redis_client.lpush("site:start_urls", site + "/robots-meta/")
        nodes.start("site", redis_url, spider_args={"allow": "/robots-meta/"},
                    MAX_IDLE_TIME_BEFORE_CLOSE=3, DNS_SHARED=True, DNS_SERVERS=dns.url,
                    CRAWL_PURPOSE="ai-train")  # fmt: skip
        assert nodes.wait(120) == [0], nodes.tail()
    finally:
        dns.stop()

    # both crawls fetched the same pages: a refused page's links are followed
    followed = {f"/robots-meta/from/{name}" for name in PAGES if name not in NOFOLLOW}
    refused = {"/robots-meta/"} | {f"/robots-meta/{name}" for name in PAGES}
    hits = {p: n for p, n in site_hits(demo_site).items() if p.startswith("/robots-meta/")}
    assert hits == {p: 2 for p in refused | followed} | {"/robots-meta/paid": 2}

    by_crawl: dict[str, set[str]] = {}
    for item in read_items(tmp_path / "items"):
        by_crawl.setdefault(item.get("_crawl", ""), set()).add(item["url"].removeprefix(site))
    assert by_crawl[""] == followed  # train-ai=y there alone
    allowed = {p for p in refused if p.rpartition("/")[2] not in NOINDEX}
    assert by_crawl["everything"] == followed | allowed

    # counted per host with the flushes, in the stats, and said by scrapy status
    assert redis_client.zrange("site:usage:refused", 0, -1, withscores=True) == [
        (b"signals.test", float(len(refused)))
    ]
    assert nodes.stat(0, "usage/refused_pages/ai-train") == len(refused)
    dropped = nodes.stat(0, "usage/items_dropped")
    assert dropped == len(allowed)  # (robots meta's noindex took the others first)
    status = scrapy("status", "site", "-s", f"REDIS_URL={redis_url}").stdout
    line = f"refused by their sites: {len(refused)} pages (ai-train {len(refused)}), "
    assert f"{line}{dropped} items dropped; most from signals.test {len(refused)}" in status
