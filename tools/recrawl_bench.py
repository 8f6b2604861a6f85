"""``make bench`` section 16: what keeping a crawl fresh costs.

The shop crawl (its pages carry ETags) is run once with every page kept for a
recrawl, then every page is made due (as ``scrapy recrawl`` does) and a fresh
node fetches them all again: nothing changed, so each answers 304 and is not
parsed. Both crawls by one node, for each place the state can live; with the
bytes each page's recrawl state takes there.
"""

from __future__ import annotations

import json
import statistics
import urllib.request
import uuid
from pathlib import Path

import bson
import pymongo

from extensions.frontier.frontier import Frontier
from extensions.keys import SpiderKeys
from extensions.recrawl.statusstore import MongoStatusStore
from servers import services
from servers.clients import redis_at

STORES = ("redis", "mongo")
FEED = 10_000  # pages queued a round while making every page due


def _crawl(redis_url: str, settings: dict[str, str], workdir: Path, site_url: str) -> dict:
    """One node until the frontier is empty: pages fetched, seconds, node CPU."""
    with urllib.request.urlopen(site_url + "/__times", timeout=10) as answer:
        before = {path: len(stamps) for path, stamps in json.load(answer).items()}
    log = workdir / f"node-{uuid.uuid4().hex[:6]}.log"
    proc = services.start_node("shop", redis_url, log=log, settings=settings)
    cpu = services.wait_node(proc, log)
    with urllib.request.urlopen(site_url + "/__times", timeout=10) as answer:
        times = json.load(answer)
    stamps = sorted(
        t for path, ts in times.items() if path != "/robots.txt" for t in ts[before.get(path, 0) :]
    )
    return {
        "pages": len(stamps),
        "seconds": stamps[-1] - stamps[0],
        "cpu": cpu,
    }


def measure(redis_url: str, mongo_uri: str, workdir: Path, concurrency: int) -> dict[str, dict]:
    """Per store: the first crawl, the recrawl, the 304s, and bytes of state a page."""
    results: dict[str, dict] = {}
    client = redis_at(redis_url)
    for store in STORES:
        client.flushall()
        database = f"bench_{uuid.uuid4().hex[:8]}"
        site = services.start_demo_site()
        try:
            settings = {
                "CONCURRENT_REQUESTS": str(concurrency),
                "CONCURRENT_REQUESTS_PER_DOMAIN": str(concurrency),
                "MAX_IDLE_TIME_BEFORE_CLOSE": "1",
                "ITEMS_DIR": str(workdir / f"items-{store}"),
                "LOG_LEVEL": "WARNING",
                "RECRAWL_AFTER": "86400",
                "RECRAWL_STORE": store,
            }
            if store == "mongo":
                settings |= {"MONGO_URI": mongo_uri, "MONGO_DATABASE": database}
            client.lpush("shop:start_urls", site.url + "/")
            first = _crawl(redis_url, settings, workdir, site.url)
            keys = SpiderKeys.for_spider("shop")
            frontier = Frontier(client, keys, "bench")
            # every page made due and queued, as `scrapy recrawl shop` does
            if store == "redis":
                kept = client.hlen(keys.revisit)
                used = sum(
                    client.memory_usage(key, samples=0) or 0 for key in (keys.revisit, keys.due)
                )
                state_bytes = used / kept
                redis_bytes = state_bytes
                chosen, _ = frontier.recrawl_now(lambda url, fetched_at: True)
                while frontier.feed_due(FEED, in_turn=False):
                    pass
            else:
                mongo = MongoStatusStore(mongo_uri, database, "shop_status")
                docs = list(mongo.collection.find())
                kept = len(docs)
                state_bytes = statistics.mean(len(bson.encode(doc)) for doc in docs)
                redis_bytes = client.hlen(keys.revisit)  # pages marked queued: none now
                chosen = mongo.make_due(None, None, None)
                while mongo.feed(frontier, FEED, 600):
                    pass
                mongo.close()
            with urllib.request.urlopen(site.url + "/__not_modified", timeout=10) as answer:
                before_304 = sum(json.load(answer).values())
            again = _crawl(redis_url, settings, workdir, site.url)
            with urllib.request.urlopen(site.url + "/__not_modified", timeout=10) as answer:
                not_modified = sum(json.load(answer).values()) - before_304
            results[store] = {
                "first": first,
                "again": again,
                "kept": kept,
                "made_due": chosen,
                "not_modified": not_modified,
                "state_bytes": state_bytes,
                "redis_bytes": redis_bytes,
            }
        finally:
            site.stop()
            if store == "mongo":
                with pymongo.MongoClient(mongo_uri) as mongo_client:
                    mongo_client.drop_database(database)
    client.close()
    return results


def report(results: dict[str, dict], mongo_server: str) -> None:
    print("\n16. Keeping a crawl fresh: the shop crawled, then every page made due and")
    print("    crawled again by a fresh node; nothing changed, so each page answers 304")
    print(f"    (one node; MongoDB: {mongo_server})")
    print(
        f"   {'state in':10s} {'crawl':8s} {'pages':>6s} {'pages/s':>8s} {'CPU ms/page':>12s}"
        f" {'304s':>6s} {'ratio':>6s}"
    )
    for store, figures in results.items():
        base = figures["first"]["pages"] / figures["first"]["seconds"]
        for label in ("first", "again"):
            crawl = figures[label]
            rate = crawl["pages"] / crawl["seconds"]
            shown_304 = figures["not_modified"] if label == "again" else 0
            print(
                f"   {store:10s} {label:8s} {crawl['pages']:6d} {rate:8.0f}"
                f" {1000 * crawl['cpu'] / crawl['pages']:12.2f} {shown_304:6d}"
                f" {rate / base:5.2f}x"
            )
    print("   bytes of recrawl state a page kept:")
    redis_fig = results.get("redis")
    if redis_fig:
        print(
            f"     redis: {redis_fig['state_bytes']:.0f} B of Redis memory "
            f"({redis_fig['kept']} pages kept)"
        )
    mongo_fig = results.get("mongo")
    if mongo_fig:
        print(
            f"     mongo: {mongo_fig['state_bytes']:.0f} B of BSON a document in MongoDB "
            f"(before its _id and due index entries), {mongo_fig['redis_bytes']} pages "
            f"marked in Redis once the crawl is over ({mongo_fig['kept']} pages kept)"
        )
