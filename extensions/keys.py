"""Every Redis key this package writes, in one place.

All keys of one spider share the prefix ``NAME:``; with ``REDIS_CLUSTER`` on, the
prefix is ``{NAME}:`` instead, a hash tag that puts every key of the spider in one
Redis Cluster hash slot (the Lua scripts and transactions touch several at once).
Types and meanings:

=============================  ======  ==================================================
key                            type    holds
=============================  ======  ==================================================
``NAME:start_urls``            list    start URLs pushed by users: a raw URL or scrapy-redis
                                       JSON (``{"url": ..., "meta": ..., "priority": ...}``);
                                       LPUSH adds, nodes take the oldest first (a set with
                                       REDIS_START_URLS_AS_SET, a sorted set, highest score
                                       first, with REDIS_START_URLS_AS_ZSET)
``NAME:queue:GROUP``           zset    one queue per host (or domain, or download slot:
                                       FRONTIER_QUEUE_BY): request id -> order (priority
                                       first, then discovery order)
``NAME:data:GROUP``            hash    that group's queued and leased requests: id -> JSON,
                                       written once when queued, gone when finished
``NAME:ready``                 zset    groups with work that may be leased now -> their
                                       first request's order
``NAME:waiting``               zset    groups with work held back by politeness -> the time
                                       they may be leased again (ms since epoch)
``NAME:host:GROUP``            hash    that group's state: next (its next send slot, ms),
                                       leased, accepted (for HOST_PAGE_BUDGET), dropped:REASON;
                                       once it pushed back: hold (ms), why, strikes, pushed,
                                       refused, pushbacks, bans, arate (its adaptive rate),
                                       peak, changed, lat, lat_min; orate, win, wl (the rate
                                       it is leased at)
``NAME:held``                  zset    groups held because they pushed back -> hold end (ms)
``NAME:banned``                zset    of those, the ones held for a ban -> hold end (ms)
``NAME:frontier``              hash    queued (requests in all group queues, and in MongoDB
                                       with FRONTIER_OVERFLOW: spilled counts those,
                                       host_queue_max is the bound, lives numbers
                                       the trips out; render_queued:
                                       those in render groups), seq (the
                                       discovery counter behind the order), format (the
                                       layout the crawl was brought to when a node opened)
``NAME:rates``                 hash    requests per second per group ('*' = the default),
                                       from CLUSTER_HOST_RATE(S); read by every lease
``NAME:crawl_delay``           hash    robots.txt Crawl-delay per group, in seconds
``NAME:requests``              zset    the queue of earlier versions (converted into the
                                       group queues when a node opens) and of scrapy-redis
``NAME:dupefilter``            hash    'n' = how many fingerprints were ever scheduled (the
                                       2-byte buckets of earlier versions are moved into the
                                       levels when a node opens)
``NAME:dupefilter:L:B``        hash    level L, bucket B of the exact dupefilter: 7 bytes of
                                       each fingerprint as a field (a small listpack)
``NAME:bloom:N``               string  with DUPEFILTER_MODE = "bloom": shard N of the filter's
                                       bitmap, instead of NAME:dupefilter
``NAME:bloom:count``           string  with DUPEFILTER_MODE = "bloom": fingerprints added
``NAME:leases:NODE``           zset    requests handed to NODE and not yet finished:
                                       GROUP newline id -> lease deadline (ms)
``NAME:start_leases:NODE``     list    start-URL entries NODE took from the start list and
                                       has not queued yet; back to the start list if it dies
``NAME:delayed``               zset    retries waiting for their backoff to pass:
                                       GROUP newline JSON request -> due time (ms)
``NAME:nodes``                 zset    node id -> last heartbeat (ms since epoch)
``NAME:node:NODE``             hash    that node's progress: pages, items, started, host, pid
``NAME:checkpoint``            hash    the crawl's progress: pages, items, started, updated,
                                       and the last seen queued / in_flight / delayed /
                                       dlq / seen
``NAME:proxies``               hash    proxies found dead: host:port -> "rest until
                                       (s since epoch):failed attempts"
``NAME:dlq``                   list    JSON records of what failed for good (bad start URL
                                       entries among them), with the reason
``NAME:fingerprinter``         string  set by ``scrapy migrate``: "scrapy-redis" when the
                                       dupefilter holds scrapy-redis's request fingerprints
``NAME:migrating:WHAT``       any     scrapy-redis's queue (``requests``) and dupefilter while
                                       ``scrapy migrate`` converts them (gone once converted)
``NAME:revisit``               hash    RECRAWL_AFTER: request fingerprint (hex) -> "GROUP\nJSON",
                                       the request to fetch again, its validators and
                                       content fingerprint in its meta ``recrawl``; with
                                       RECRAWL_STORE = "mongo", only the pages moved from
                                       MongoDB into the queue: fingerprint -> group
``NAME:due``                   zset    RECRAWL_AFTER: request fingerprint -> when it is due
                                       again (ms since epoch)
``NAME:crawls``                hash    crawls under an id (scrapy seed --crawl ID): id -> state
                                       (running, paused, stopped, expired); '*' = paused
                                       pauses every crawl, '' the crawl without an id
``NAME:crawl:ID``              hash    crawl ID: weight, budget, started, expires (ms),
                                       updated (its last activity), done, items, dlq,
                                       queued, in_flight, delayed, accepted, removed,
                                       dropped (per shard: queued .. dropped, weight, budget)
``NAME:crawl:ID:ready``        zset    crawl ID's groups that may be leased now (the crawl
                                       without an id keeps NAME:ready); its groups are
                                       HOST#ID: the host part keys politeness, shared
``NAME:crawl:ID:groups``       set     every group crawl ID queued in (what stopping empties)
``NAME:turns``                 zset    running crawls with groups ready -> requests given,
                                       by weight: who leases next ('' = without an id)
``NAME:crawl_ends``            zset    crawls with an expiry -> when (ms); stopped ones
                                       still being emptied -> 0
``NAME:ready:render``          zset    groups of the render lane (HOST!render: requests a
                                       browser fetches) that may be leased now; a crawl
                                       under an id has NAME:crawl:ID:ready:render
``NAME:turns:render``          zset    NAME:turns of the render lane
``NAME:render_nodes``          zset    render nodes (RENDER_ENABLED, a browser found) -> last
                                       heartbeat (ms since epoch)
``NAME:render_auto``           hash    RENDER_AUTO: URL patterns (host/dir/) learned as
                                       needing a browser -> when (ms since epoch);
                                       '#changes' counts what was learned (nodes follow it)
``NAME:series``                hash    the last SERIES_HOURS of the crawl per minute, for
                                       the console's charts: MINUTE:p (pages), MINUTE:i
                                       (items), MINUTE:e (errors) -> count; MINUTE =
                                       minutes since the epoch
``NAME:audit``                 list    what people did in the console (newest first, at
                                       most 1,000): JSON with time, user, action, detail
``NAME:spill``                 list    FRONTIER_OVERFLOW: requests on their way to MongoDB
                                       (``NAME_frontier``): GROUP, ID, LIFE (the request's
                                       trip out: 'lives' in NAME:frontier counts them),
                                       ORDER and JSON, one per line
``NAME:spilling:NODE``         list    the batch NODE is writing to MongoDB (written again
                                       by any node if NODE dies)
``NAME:spillers``              zset    nodes with such a batch -> when they took it (ms)
``NAME:overflow:GROUP``        hash    that group's requests out of Redis: n (in MongoDB or
                                       on their way), floor (none has a better order),
                                       transit (on their way), tmin (the best of those)
``NAME:refill``                zset    groups due for a refill from MongoDB -> when one may
                                       be claimed (ms; a claim pushes it ahead)
``NAME:refilled``              hash    requests back from MongoDB whose documents are not
                                       yet marked taken: GROUP, ID and LIFE, one per
                                       line -> node
``NAME:shards``                string  FRONTIER_SHARDS of a sharded crawl, set by its first node:
                                       a node with another count is refused
``{NAME:K}:...``               -       with FRONTIER_SHARDS > 1, shard K's queue, data, host,
                                       ready, waiting, held, banned, frontier, rates,
                                       crawl_delay, delayed,
                                       leases, nodes, dupefilter, revisit and due keys (as
                                       above, under the hash tag ``{NAME:K}``); the rest
                                       stay under NAME
=============================  ======  ==================================================
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from redis.cluster import RedisCluster

from extensions import connection
from extensions.crawlid import host_of
from extensions.installed import require_addon
from extensions.runtime import runtime_of

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings

#: Who writes each key (docs/reference/keys.md is written from it): aim for one writer.
WRITTEN_BY = {
    "start_urls": "users (LPUSH, scrapy seed); start_lease.lua takes, reclaim.lua gives back",
    "queue": "enqueue*.lua (scheduler flush, scrapy dlq replay), lease.lua, reclaim.lua",
    "data": "enqueue*.lua, lease.lua (retries due), the scheduler's flush (release)",
    "ready": "enqueue*.lua, lease.lua, reclaim.lua",
    "waiting": "enqueue*.lua, lease.lua, host_feedback.lua (holds)",
    "host": "enqueue*.lua (accepted, dropped), lease.lua (next, leased, orate), "
    "host_feedback.lua (holds, adaptive rate), send_slot.lua (next)",
    "held": "host_feedback.lua",
    "banned": "host_feedback.lua",
    "frontier": "enqueue*.lua, lease.lua, reclaim.lua, refill.lua; spilling.py (host_queue_max)",
    "rates": "politeness.py (each node at start)",
    "crawl_delay": "politeness.py (from robots.txt)",
    "requests": "earlier versions; scheduler.py converts it at open",
    "dupefilter": "enqueue.lua",
    "bloom": "enqueue_bloom.lua; shards created by frontier.py",
    "leases": "lease.lua, the scheduler's flush (release), reclaim.lua",
    "start_leases": "start_lease.lua, the flush or the spider (acknowledge), reclaim.lua",
    "delayed": "the scheduler's flush (retries, waits), lease.lua (due ones to the queue)",
    "nodes": "checkpoint.py (heartbeat), lease.lua, start_lease.lua, reclaim.lua (forget)",
    "node": "checkpoint.py; reclaim.lua (forget)",
    "checkpoint": "checkpoint.py, the scheduler's flush (done)",
    "proxies": "proxies.py",
    "dlq": "deadletter.py (for the scheduler, spiders, retry middleware); scrapy dlq replay/purge",
    "fingerprinter": "scrapy migrate; Frontier.clear (forget)",
    "migrating": "scrapy migrate",
    "shards": "scheduler.py (the first node of a sharded crawl); Frontier.clear (forget)",
    "crawls": "crawls.py (scrapy seed --crawl, pause, resume, stop; a node meeting a new id)",
    "crawl": "crawls.py (settings); enqueue*.lua, lease.lua, reclaim.lua, release.lua "
    "(counters); the scheduler's flush (done, items); deadletter.py (dlq)",
    "crawl_ready": "enqueue*.lua, lease.lua, reclaim.lua (as NAME:ready); crawls.py (stop)",
    "crawl_groups": "enqueue*.lua, lease.lua, reclaim.lua; crawls.py (stop)",
    "turns": "enqueue*.lua, lease.lua, reclaim.lua; crawls.py (pause, resume, stop)",
    "crawl_ends": "crawls.py (seed --expire-after, stop; heartbeats end and empty them)",
    "render_nodes": "checkpoint.py (a render node's heartbeat; gone when it leaves)",
    "render_auto": "render/autocheck.py (RENDER_AUTO learns and unlearns patterns)",
    "series": "checkpoint.py (every node's heartbeat adds its minute and drops the oldest)",
    "audit": "console/actions.py (each action taken in the console)",
    "spill": "enqueue*.lua, lease.lua, reclaim.lua, recrawl_requeue.lua (a group over its "
    "bound); overflow_take.lua takes",
    "spilling": "overflow_take.lua, spill_done.lua",
    "spillers": "overflow_take.lua, spill_done.lua",
    "overflow": "the scripts that queue (spill), spill_done.lua, refill.lua",
    "refill": "lease.lua, spill_done.lua, crawl_drain.lua, overflow_take.lua (claims), refill.lua",
    "refilled": "refill.lua; spilling.py (once the documents are marked taken)",
}

START_URLS = "%(name)s:start_urls"
REQUESTS = "%(name)s:requests"
DUPEFILTER = "%(name)s:dupefilter"
BLOOM = "%(name)s:bloom:"  # + shard number
BLOOM_COUNT = "%(name)s:bloom:count"
LEASES = "%(name)s:leases:%(node)s"
START_LEASES = "%(name)s:start_leases:%(node)s"
DELAYED = "%(name)s:delayed"
NODES = "%(name)s:nodes"
NODE = "%(name)s:node:%(node)s"
CHECKPOINT = "%(name)s:checkpoint"
QUEUE = "%(name)s:queue:%(group)s"
DATA = "%(name)s:data:%(group)s"
READY = "%(name)s:ready"
WAITING = "%(name)s:waiting"
HOST = "%(name)s:host:%(group)s"
HELD = "%(name)s:held"
BANNED = "%(name)s:banned"
FRONTIER = "%(name)s:frontier"
RATES = "%(name)s:rates"
CRAWL_DELAY = "%(name)s:crawl_delay"
PROXIES = "%(name)s:proxies"
DLQ = "%(name)s:dlq"
FINGERPRINTER = "%(name)s:fingerprinter"
MIGRATING = "%(name)s:migrating:%(what)s"
SHARDS = "%(name)s:shards"
CRAWLS = "%(name)s:crawls"
CRAWL = "%(name)s:crawl:%(crawl)s"
TURNS = "%(name)s:turns"
CRAWL_ENDS = "%(name)s:crawl_ends"
RENDER_NODES = "%(name)s:render_nodes"
RENDER_AUTO = "%(name)s:render_auto"
SERIES = "%(name)s:series"
AUDIT = "%(name)s:audit"
SPILL = "%(name)s:spill"
SPILLING = "%(name)s:spilling:%(node)s"
SPILLERS = "%(name)s:spillers"
OVERFLOW = "%(name)s:overflow:%(group)s"
REFILL = "%(name)s:refill"
REFILLED = "%(name)s:refilled"
REVISIT = "%(name)s:revisit"
DUE = "%(name)s:due"

AUTO = "auto"  # FRONTIER_SHARDS chosen from the Redis the crawl runs on
MAX_SHARDS = 4096


@dataclass(frozen=True)
class SpiderKeys:
    """The keys of one spider, with node- and host-specific keys built on demand."""

    name: str
    #: what stands for NAME in the keys: the spider name, or ``{name}`` with a hash tag
    prefix: str
    start_urls: str
    requests: str
    dupefilter: str
    bloom_prefix: str
    bloom_count: str
    delayed: str
    revisit: str
    due: str
    nodes: str
    checkpoint: str
    dlq: str
    proxies: str
    fingerprinter: str
    ready: str
    waiting: str
    frontier: str
    rates: str
    crawl_delay: str
    held: str
    banned: str
    crawls: str = ""
    turns: str = ""
    crawl_ends: str = ""
    render_nodes: str = ""
    render_auto: str = ""
    series: str = ""
    audit: str = ""
    #: the start key's Redis type: "list", "set" or "zset" (scrapy-redis's three kinds)
    start_type: str = "list"
    #: FRONTIER_SHARDS: how many parts the frontier is split into, each under a hash
    #: tag of its own (``{NAME:K}``); 1 keeps every key under NAME
    shards: int = 1
    shards_key: str = ""
    #: FRONTIER_SHARDS = "auto" and the count not yet resolved against Redis
    #: (``for_crawler`` resolves it; a command adopts what the crawl recorded)
    auto_shards: bool = False

    @classmethod
    def for_spider(
        cls,
        name: str,
        start_urls_template: str = START_URLS,
        *,
        hash_tag: bool = False,
        start_type: str = "list",
        shards: int = 1,
    ) -> SpiderKeys:
        if shards < 1:
            raise ValueError(f"FRONTIER_SHARDS must be at least 1, not {shards}")
        prefix = f"{{{name}}}" if hash_tag else name
        subs = {"name": prefix, "spider": prefix}
        start_urls = start_urls_template % subs
        if hash_tag and prefix not in start_urls:
            raise ValueError(
                f"with REDIS_CLUSTER, the start URL key must contain %(name)s so that it "
                f"shares the spider's hash slot; {start_urls_template!r} does not"
            )
        return cls(
            name=name,
            prefix=prefix,
            start_urls=start_urls,
            requests=REQUESTS % subs,
            dupefilter=DUPEFILTER % subs,
            bloom_prefix=BLOOM % subs,
            bloom_count=BLOOM_COUNT % subs,
            delayed=DELAYED % subs,
            revisit=REVISIT % subs,
            due=DUE % subs,
            nodes=NODES % subs,
            checkpoint=CHECKPOINT % subs,
            dlq=DLQ % subs,
            proxies=PROXIES % subs,
            fingerprinter=FINGERPRINTER % subs,
            ready=READY % subs,
            waiting=WAITING % subs,
            frontier=FRONTIER % subs,
            rates=RATES % subs,
            crawl_delay=CRAWL_DELAY % subs,
            held=HELD % subs,
            banned=BANNED % subs,
            crawls=CRAWLS % subs,
            turns=TURNS % subs,
            crawl_ends=CRAWL_ENDS % subs,
            render_nodes=RENDER_NODES % subs,
            render_auto=RENDER_AUTO % subs,
            series=SERIES % subs,
            audit=AUDIT % subs,
            start_type=start_type,
            shards=shards,
            shards_key=SHARDS % subs,
        )

    @classmethod
    def from_settings(
        cls, name: str, settings: BaseSettings, start_urls_template: str | None = None
    ) -> SpiderKeys:
        """The keys of spider ``name`` under ``REDIS_START_URLS_KEY`` (unless the
        spider names its own template) and ``REDIS_CLUSTER``."""
        require_addon(settings, "SpiderKeys.from_settings")
        template = start_urls_template or settings.get("REDIS_START_URLS_KEY")
        hash_tag = settings.getbool("REDIS_CLUSTER")
        shards = shards_setting(settings)
        keys = cls.for_spider(
            name,
            template,
            hash_tag=hash_tag,
            start_type=start_type(settings),
            shards=shards or 1,
        )
        return replace(keys, auto_shards=True) if shards is None else keys

    @classmethod
    def for_crawler(cls, crawler: Crawler) -> SpiderKeys:
        """The keys of the crawler's spider (its ``redis_key`` template, if any),
        with FRONTIER_SHARDS = "auto" resolved once per crawler against Redis."""
        spidercls = crawler.spidercls
        assert spidercls is not None
        template = getattr(spidercls, "redis_key", None)
        keys = cls.from_settings(spidercls.name, crawler.settings, template)
        if not keys.auto_shards:
            return keys
        runtime = runtime_of(crawler)
        shards = runtime.shards
        if shards is None:
            server = connection.from_settings(crawler.settings)
            try:
                shards = auto_shards(server, keys)
            finally:
                server.close()
            runtime.shards = shards
        return replace(keys, shards=shards, auto_shards=False)

    def leases(self, node: str) -> str:
        return LEASES % {"name": self.prefix, "node": node}

    def start_leases(self, node: str) -> str:
        return START_LEASES % {"name": self.prefix, "node": node}

    def node(self, node: str) -> str:
        return NODE % {"name": self.prefix, "node": node}

    def queue(self, group: str) -> str:
        return QUEUE % {"name": self.prefix, "group": group}

    def data(self, group: str) -> str:
        return DATA % {"name": self.prefix, "group": group}

    def host(self, group: str) -> str:
        return HOST % {"name": self.prefix, "group": group}

    def crawl(self, crawl: str) -> str:
        """Crawl ``crawl``'s hash (its settings and counters); the scripts find it
        next to the group data (``_shared.lua``: NAME:data: -> NAME:crawl:ID)."""
        return CRAWL % {"name": self.prefix, "crawl": crawl}

    def crawl_ready(self, crawl: str) -> str:
        return self.ready if not crawl else self.crawl(crawl) + ":ready"

    def crawl_groups(self, crawl: str) -> str:
        return self.crawl(crawl) + ":groups"

    def migrating(self, what: str) -> str:
        return MIGRATING % {"name": self.prefix, "what": what}

    @property
    def spill(self) -> str:
        return SPILL % {"name": self.prefix}

    def spilling(self, node: str) -> str:
        return SPILLING % {"name": self.prefix, "node": node}

    @property
    def spillers(self) -> str:
        return SPILLERS % {"name": self.prefix}

    def overflow(self, group: str) -> str:
        return OVERFLOW % {"name": self.prefix, "group": group}

    @property
    def refill(self) -> str:
        return REFILL % {"name": self.prefix}

    @property
    def refilled(self) -> str:
        return REFILLED % {"name": self.prefix}

    def leases_prefix(self) -> str:
        return self.leases("")

    def shard(self, index: int) -> SpiderKeys:
        """The keys of frontier shard ``index``: these keys themselves when the
        frontier is whole; else every key under the hash tag ``{NAME:index}``, so
        one shard's queues, leases, politeness state and dupefilter share a slot
        (its start list, registry and the like are its own, and stay empty but
        for its registry)."""
        if self.shards == 1:
            return self
        if not 0 <= index < self.shards:
            raise IndexError(f"shard {index} of {self.shards}")
        keys = SpiderKeys.for_spider(f"{self.name}:{index}", hash_tag=True)
        return replace(keys, name=self.name)

    def all_shards(self) -> list[SpiderKeys]:
        return [self.shard(index) for index in range(self.shards)]

    def shard_of(self, group: str) -> int:
        """The shard of a queue group: a stable hash of its host part, mod
        FRONTIER_SHARDS (every crawl's queue of a host is where the host's state is)."""
        if self.shards == 1:
            return 0
        return zlib.crc32(host_of(group).encode("utf-8", "surrogateescape")) % self.shards


def shards_setting(settings: BaseSettings) -> int | None:
    """FRONTIER_SHARDS as a count, or None for "auto"."""
    value = settings.get("FRONTIER_SHARDS")
    if str(value).strip().lower() == AUTO:
        return None
    return int(value)


def start_type(settings: BaseSettings) -> str:
    """The start key's type under scrapy-redis's REDIS_START_URLS_AS_SET / _AS_ZSET."""
    as_set = settings.getbool("REDIS_START_URLS_AS_SET")
    as_zset = settings.getbool("REDIS_START_URLS_AS_ZSET")
    if as_set and as_zset:
        raise ValueError("REDIS_START_URLS_AS_SET and REDIS_START_URLS_AS_ZSET are both on")
    return "zset" if as_zset else "set" if as_set else "list"


# Shards per primary for FRONTIER_SHARDS = "auto": a shard's slot follows its
# name, so it takes about 30 per primary before each holds within ~15 % of an
# even share (docs/SCALING.md, `make bench` section 14).
AUTO_SHARDS_PER_PRIMARY = 32


def auto_shards(server: Any, spider_keys: SpiderKeys) -> int:
    """FRONTIER_SHARDS = "auto": the count the crawl recorded; else 1 for a
    crawl begun unsharded or on a single Redis; else 32 per primary of the
    Redis Cluster the node finds (so nodes that start together agree)."""
    stored = server.get(spider_keys.shards_key)
    if stored is not None:
        try:
            return min(max(int(stored), 1), MAX_SHARDS)
        except ValueError:
            return 1  # not a count: shards_problem says so
    if not isinstance(server, RedisCluster):
        return 1
    unsharded = (spider_keys.frontier, spider_keys.dupefilter, spider_keys.bloom_count)
    if server.exists(*unsharded):
        return 1
    return min(len(server.get_primaries()) * AUTO_SHARDS_PER_PRIMARY, MAX_SHARDS)
