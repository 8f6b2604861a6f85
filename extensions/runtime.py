"""What every component of one crawler shares, built once and found through one
accessor (``runtime_of(crawler)``): its node id, its Redis client and that
client's health, and what other per-crawler state the components hand each other.

Components used to keep these as private attributes on Scrapy's ``Crawler``
and to build a Redis client each; now the scheduler, the spider, the
middlewares, the pipeline and the metrics use one client (redis-py's clients
are safe to share: each command takes a connection from the client's pool).
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import redis
    from scrapy.crawler import Crawler


@dataclass
class Runtime:
    #: this node's id (NODE_ID, else host-pid-random): cluster.checkpoint.node_id_for
    node_id: str | None = None
    #: the shared Redis client: connection.client_for
    server: redis.Redis | None = None
    #: its outages, said once: connection.health_for
    health: Any = None
    #: start-URL entries on their way to the scheduler: start_urls.tracker_for
    start_entries: Any = None
    #: FRONTIER_SHARDS = "auto" as resolved against Redis: keys.SpiderKeys.for_crawler
    shards: int | None = None
    #: items scraped per crawl under an id since the scheduler's last flush
    #: (spidermiddlewares/crawlid.py counts, the scheduler writes them)
    crawl_items: dict[str, int] = field(default_factory=dict)
    #: the crawl of items that cannot carry a ``_crawl`` field themselves, until the
    #: item store takes it (spidermiddlewares/crawlid.py)
    item_crawls: Any = None
    #: a reparsed item's archived fetch time, beside an item that cannot take it
    #: as a field, until the item store takes it (itemtimes.py)
    item_times: Any = None
    #: RENDER_AUTO's learned patterns and their node-local cache, one for the
    #: scheduler (which decides) and the check (which learns): policy.learned_for
    render_learned: Any = None
    #: each request as the scheduler leased it: frontier/leased.py, leased_for
    leased: Any = None
    #: fetched pages' revisit records on their way to the scheduler:
    #: recrawl/revisits.py, revisits_for
    revisits: Any = None
    #: DNS_SHARED: the node's resolver (dns/resolver.py), and why names failed
    resolver: Any = None
    #: WARC_ENABLED: the node's WARC files (warc/files.py), written by the
    #: middleware, made durable by the frontier part before leases are released
    warc: Any = None
    #: WARC_REVISITS: payloads archived in full, entered in the crawl's digest
    #: index once the part has synced their records (warc/digests.py)
    warc_payloads: Any = None
    #: WARC writes that fail: the node parks what it fetched, leases nothing (warc/hold.py)
    warc_hold: Any = None
    #: netloc -> the send slot of the page whose robots.txt is being fetched: the
    #: robots.txt goes at it, the page asks for a new one (robotstxt.py, pushback.py)
    robots_slots: dict[str, Any] = field(default_factory=dict)
    #: groups whose robots.txt asked for a Crawl-delay, fetched here or read from the
    #: cluster: their requests leased before Redis knew it ask for a send slot
    #: (sendslots.py, robotstxt.py)
    crawl_delayed: OrderedDict[str, None] = field(default_factory=OrderedDict)
    #: netloc -> the usage preferences its robots.txt states (usage.py), fetched here
    #: or read from the cluster, for its items (robotstxt.py, spidermiddlewares/usage.py)
    usage: OrderedDict[str, dict[str, str]] = field(default_factory=OrderedDict)
    #: the URL normalizer chain as this node runs it, one for the admission and the
    #: canonical middleware (its learned parameters read once): urlnorm/chain.py
    normalizing: Any = None
    #: fingerprints and URLs this node sent to the shared dupefilter: the
    #: admission writes them, the link path reads them (frontier/sent.py, sent_for)
    sent: Any = None
    #: request -> its parked copy when its host is held as the downloader is about
    #: to send it, else None (downloader.py; the pushback middleware's)
    send_gate: Any = None


_runtimes: weakref.WeakKeyDictionary[Crawler, Runtime] = weakref.WeakKeyDictionary()


def runtime_of(crawler: Crawler) -> Runtime:
    """The crawler's runtime, built on first use."""
    runtime = _runtimes.get(crawler)
    if runtime is None:
        runtime = _runtimes[crawler] = Runtime()
    return runtime
