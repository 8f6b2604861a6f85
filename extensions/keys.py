"""Every Redis key this package writes, in one place.

All keys of one spider share the prefix ``NAME:``. Types and meanings:

=============================  ======  ==================================================
key                            type    holds
=============================  ======  ==================================================
``NAME:start_urls``            list    start URLs pushed by users: a raw URL or scrapy-redis
                                       JSON (``{"url": ..., "meta": ..., "priority": ...}``);
                                       LPUSH adds, nodes take the oldest first
``NAME:requests``              zset    the shared request queue: JSON request -> -priority
``NAME:dupefilter``            hash    fingerprints of every request ever scheduled: 2-byte
                                       bucket -> 12-byte tails side by side; 'n' = count
``NAME:bloom:N``               string  with DUPEFILTER_MODE = "bloom": shard N of the filter's
                                       bitmap, instead of NAME:dupefilter
``NAME:bloom:count``           string  with DUPEFILTER_MODE = "bloom": fingerprints added
``NAME:leases:NODE``           zset    requests handed to NODE and not yet finished:
                                       JSON request -> lease deadline (ms since epoch)
``NAME:delayed``               zset    retries waiting for their backoff to pass:
                                       JSON request -> due time (ms since epoch)
``NAME:nodes``                 zset    node id -> last heartbeat (ms since epoch)
``NAME:node:NODE``             hash    that node's progress: pages, items, started, host, pid
``NAME:checkpoint``            hash    the crawl's progress: pages, items, started, updated,
                                       and the last seen queued / in_flight / delayed /
                                       dlq / seen
``NAME:rate:HOST``             string  next free send time for HOST under CLUSTER_HOST_RATE
                                       (ms since epoch; expires when idle)
``NAME:proxies``               hash    proxies found dead: host:port -> "rest until
                                       (s since epoch):failed attempts"
``NAME:dlq``                   list    JSON records of what failed for good (bad start URL
                                       entries among them), with the reason
=============================  ======  ==================================================
"""

from __future__ import annotations

from dataclasses import dataclass

START_URLS = "%(name)s:start_urls"
REQUESTS = "%(name)s:requests"
DUPEFILTER = "%(name)s:dupefilter"
BLOOM = "%(name)s:bloom:"  # + shard number
BLOOM_COUNT = "%(name)s:bloom:count"
LEASES = "%(name)s:leases:%(node)s"
DELAYED = "%(name)s:delayed"
NODES = "%(name)s:nodes"
NODE = "%(name)s:node:%(node)s"
CHECKPOINT = "%(name)s:checkpoint"
RATE = "%(name)s:rate:%(host)s"
PROXIES = "%(name)s:proxies"
DLQ = "%(name)s:dlq"


@dataclass(frozen=True)
class SpiderKeys:
    """The keys of one spider, with node-specific keys built on demand."""

    name: str
    start_urls: str
    requests: str
    dupefilter: str
    bloom_prefix: str
    bloom_count: str
    delayed: str
    nodes: str
    checkpoint: str
    dlq: str

    @classmethod
    def for_spider(cls, name: str, start_urls_template: str = START_URLS) -> SpiderKeys:
        subs = {"name": name, "spider": name}
        return cls(
            name=name,
            start_urls=start_urls_template % subs,
            requests=REQUESTS % subs,
            dupefilter=DUPEFILTER % subs,
            bloom_prefix=BLOOM % subs,
            bloom_count=BLOOM_COUNT % subs,
            delayed=DELAYED % subs,
            nodes=NODES % subs,
            checkpoint=CHECKPOINT % subs,
            dlq=DLQ % subs,
        )

    def leases(self, node: str) -> str:
        return LEASES % {"name": self.name, "node": node}

    def node(self, node: str) -> str:
        return NODE % {"name": self.name, "node": node}

    def leases_prefix(self) -> str:
        return self.leases("")
