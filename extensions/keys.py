"""Every Redis key this package writes, built in one place.

All keys of one spider share the prefix ``NAME:``; with ``REDIS_CLUSTER`` on, the
prefix is ``{NAME}:`` instead, a hash tag that puts every key of the spider in one
Redis Cluster hash slot (the Lua scripts and transactions touch several at once).
What each key holds and who writes it: ``extensions/keyspace.py``.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from extensions import capability, connection
from extensions.crawlid import host_of
from extensions.installed import require_addon
from extensions.runtime import runtime_of
from extensions.shardcount import auto_shards, shards_setting

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings

START_URLS = "%(name)s:start_urls"
REQUESTS = "%(name)s:requests"
DUPEFILTER = "%(name)s:dupefilter"
BLOOM = "%(name)s:bloom:"  # + shard number
BLOOM_COUNT = "%(name)s:bloom:count"
LEASES = "%(name)s:leases:%(node)s"
START_LEASES = "%(name)s:start_leases:%(node)s"
COMMIT = "%(name)s:commit:%(node)s"
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
HOLDS = "%(name)s:holds"
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
SERIES = "%(name)s:series"
AUDIT = "%(name)s:audit"
DNS = "%(name)s:dns:%(host)s"
DOMAIN = "%(name)s:domain:%(domain)s"
ADDRESS = "%(name)s:ip:%(address)s"
PACE = "%(name)s:pace:%(host)s"
LINES = "%(name)s:lines"
ROBOTS = "%(name)s:robots:%(netloc)s"
DIGESTS = "%(name)s:digests:"  # + bucket (4 hex digits)
NEAR = "%(name)s:near:"  # + registered domain
PAYMENT_REQUIRED = "%(name)s:payment_required"
PARAMS = "%(name)s:params:%(host)s"
PARAMS_HOSTS = "%(name)s:params_hosts"
PARAMS_LEARNED = "%(name)s:params_learned"


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
    series: str = ""
    audit: str = ""
    holds: str = ""
    #: the start key's Redis type: "list", "set" or "zset" (scrapy-redis's three kinds)
    start_type: str = "list"
    #: FRONTIER_SHARDS: how many parts the frontier is split into, each under a hash
    #: tag of its own (``{NAME:K}``); 1 keeps every key under NAME
    shards: int = 1
    shards_key: str = ""
    #: FRONTIER_SHARDS = "auto" and the count not yet resolved against Redis
    #: (``for_crawler`` resolves it; a command adopts what the crawl recorded)
    auto_shards: bool = False
    #: a shard's keys: the prefix of the crawl's keys that are not per shard
    base_prefix: str = ""

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
            series=SERIES % subs,
            audit=AUDIT % subs,
            holds=HOLDS % subs,
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
            unsharded = (keys.frontier, keys.dupefilter, keys.bloom_count)
            client = connection.client_for(crawler)
            shards = runtime.shards = auto_shards(client, keys.shards_key, unsharded)
        return replace(keys, shards=shards, auto_shards=False)

    def leases(self, node: str) -> str:
        return LEASES % {"name": self.prefix, "node": node}

    def start_leases(self, node: str) -> str:
        return START_LEASES % {"name": self.prefix, "node": node}

    def commit(self, node: str) -> str:
        return COMMIT % {"name": self.prefix, "node": node}

    def node(self, node: str) -> str:
        return NODE % {"name": self.prefix, "node": node}

    def queue(self, group: str) -> str:
        return QUEUE % {"name": self.prefix, "group": group}

    def data(self, group: str) -> str:
        return DATA % {"name": self.prefix, "group": group}

    def host(self, group: str) -> str:
        return HOST % {"name": self.prefix, "group": group}

    def dns(self, host: str) -> str:
        return DNS % {"name": self.prefix, "host": host}

    def domain(self, domain: str) -> str:
        return DOMAIN % {"name": self.prefix, "domain": domain}

    def address(self, address: str) -> str:
        return ADDRESS % {"name": self.prefix, "address": address}

    def pace(self, host: str) -> str:
        return PACE % {"name": self.prefix, "host": host}

    def robots(self, netloc: str) -> str:
        return ROBOTS % {"name": self.prefix, "netloc": netloc}

    @property
    def digests_prefix(self) -> str:
        """Where content digests go (``spidermiddlewares/duplicates.py``), + bucket."""
        return DIGESTS % {"name": self.prefix}

    @property
    def payment_required(self) -> str:
        """Hosts that answered 402 Payment Required -> how many times."""
        return PAYMENT_REQUIRED % {"name": self.prefix}

    @property
    def near_prefix(self) -> str:
        """Near-duplicate fingerprints (``nearduplicates.py``), + registered domain."""
        return NEAR % {"name": self.prefix}

    def params(self, host: str) -> str:
        """Parameters learned for ``host`` (``frontier/params.py``); + ``:pairs``."""
        return PARAMS % {"name": self.prefix, "host": host}

    @property
    def params_hosts(self) -> str:
        return PARAMS_HOSTS % {"name": self.prefix}

    @property
    def params_learned(self) -> str:
        return PARAMS_LEARNED % {"name": self.prefix}

    @property
    def lines(self) -> str:
        return LINES % {"name": self.prefix}

    def named(self, name: str, **parts: str) -> str:
        """A key a capability declares (``extensions/capability.py``), with its
        ``parts`` (a group...): in this shard if it is kept per shard."""
        key = capability.keys()[name]
        prefix = self.prefix if key.sharded or not self.base_prefix else self.base_prefix
        return key.template % {"name": prefix, **parts}

    def crawl(self, crawl: str) -> str:
        """Crawl ``crawl``'s hash; the scripts find it next to NAME:data: (_crawls.lua)."""
        return CRAWL % {"name": self.prefix, "crawl": crawl}

    def crawl_ready(self, crawl: str) -> str:
        return self.ready if not crawl else self.crawl(crawl) + ":ready"

    def crawl_groups(self, crawl: str) -> str:
        return self.crawl(crawl) + ":groups"

    def migrating(self, what: str) -> str:
        return MIGRATING % {"name": self.prefix, "what": what}

    def leases_prefix(self) -> str:
        return self.leases("")

    def shard(self, index: int) -> SpiderKeys:
        """The keys of frontier shard ``index``: these keys themselves when the
        frontier is whole; else every key under the hash tag ``{NAME:index}``, so
        one shard's queues, leases, host state and dupefilter share a slot."""
        if self.shards == 1:
            return self
        if not 0 <= index < self.shards:
            raise IndexError(f"shard {index} of {self.shards}")
        keys = SpiderKeys.for_spider(f"{self.name}:{index}", hash_tag=True)
        return replace(keys, name=self.name, base_prefix=self.prefix)

    def all_shards(self) -> list[SpiderKeys]:
        return [self.shard(index) for index in range(self.shards)]

    def shard_of(self, group: str) -> int:
        """The shard of a queue group: a stable hash of its host part, mod FRONTIER_SHARDS."""
        if self.shards == 1:
            return 0
        return zlib.crc32(host_of(group).encode("utf-8", "surrogateescape")) % self.shards


def start_type(settings: BaseSettings) -> str:
    """The start key's type under scrapy-redis's REDIS_START_URLS_AS_SET / _AS_ZSET."""
    as_set = settings.getbool("REDIS_START_URLS_AS_SET")
    as_zset = settings.getbool("REDIS_START_URLS_AS_ZSET")
    if as_set and as_zset:
        raise ValueError("REDIS_START_URLS_AS_SET and REDIS_START_URLS_AS_ZSET are both on")
    return "zset" if as_zset else "set" if as_set else "list"
