"""Every Redis key a crawl keeps, what it holds and who writes it (the keys
themselves are built in ``extensions/keys.py``); the keys a capability package
declares (``extensions/capability.py``) are described in its declaration.

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
                                       it is leased at); with CLUSTER_DOMAIN_RATE or
                                       CLUSTER_IP_RATE: dom (its registered domain), ip
                                       (its address; '-' none, '?' the lookup failed),
                                       ipx (when it is looked up again, ms)
``NAME:held``                  zset    groups held because they pushed back -> hold end (ms)
``NAME:banned``                zset    of those, the ones held for a ban -> hold end (ms)
``NAME:holds``                 stream  each hold set (a host that refuses, a page's
                                       Retry-After, a ban): g (the group), u (its end,
                                       ms); the last thousand or so, read by every node
                                       four times a second: what it leased before waits
``NAME:frontier``              hash    queued (requests in all group queues, and in MongoDB
                                       with FRONTIER_OVERFLOW: spilled counts those,
                                       host_queue_max is the bound, lives numbers
                                       the trips out; render_queued:
                                       those in render groups), seq (the
                                       discovery counter behind the order), format (the
                                       layout the crawl was brought to when a node opened),
                                       pieces (the crawl's manifest: the parts' Lua pieces
                                       its scripts carry, frontier/manifest.py)
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
``NAME:commit:NODE``           string  the mark of NODE's last flush, written in its transaction:
                                       a flush whose answer was lost is looked up by it
                                       (in, or to be written again); a day's expiry
``NAME:delayed``               zset    retries waiting for their backoff to pass:
                                       GROUP newline JSON request -> due time (ms)
``NAME:nodes``                 zset    node id -> last heartbeat (ms since epoch)
``NAME:node:NODE``             hash    that node's progress: pages, items, started, host, pid
``NAME:checkpoint``            hash    the crawl's progress: pages, items, started, updated,
                                       and the last seen queued / in_flight / delayed /
                                       dlq / seen; noindex, nofollow: pages that asked so
``NAME:proxies``               hash    proxies found dead: host:port -> "rest until
                                       (s since epoch):failed attempts"
``NAME:dlq``                   list    JSON records of what failed for good (bad start URL
                                       entries among them), with the reason
``NAME:fingerprinter``         string  set by ``scrapy migrate``: "scrapy-redis" when the
                                       dupefilter holds scrapy-redis's request fingerprints
``NAME:migrating:WHAT``       any     scrapy-redis's queue (``requests``) and dupefilter while
                                       ``scrapy migrate`` converts them (gone once converted)
``NAME:crawls``                hash    crawls under an id (scrapy seed --crawl ID): id -> state
                                       (running, paused, stopped, expired); '*' = paused
                                       pauses every crawl, '' the crawl without an id
``NAME:crawl:ID``              hash    crawl ID: weight, budget, started, expires (ms),
                                       updated (its last activity), done, items, dlq,
                                       queued, in_flight, delayed, accepted, removed,
                                       dropped (per shard: queued .. dropped, weight, budget);
                                       turn, turn:render (its place in the turns of leasing
                                       while it has no group ready)
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
``NAME:series``                hash    the last SERIES_HOURS of the crawl per minute, for
                                       the console's charts: MINUTE:p (pages), MINUTE:i
                                       (items), MINUTE:e (errors) -> count; MINUTE =
                                       minutes since the epoch
``NAME:audit``                 list    what people did in the console (newest first, at
                                       most 1,000): JSON with time, user, action, detail
``NAME:dns:HOST``              string  DNS_SHARED: HOST's addresses for every node, JSON
                                       {"a": [addresses]}, or {"error": "NXDOMAIN"};
                                       expires with the answer's TTL (DNS_CACHE_MIN_TTL to
                                       DNS_CACHE_MAX_TTL; DNS_NEGATIVE_TTL for NXDOMAIN)
``NAME:domain:DOMAIN``          hash    CLUSTER_DOMAIN_RATE: the pace of a registered domain's
                                       hosts together: next (its next free send slot, ms);
                                       expires a minute after it has passed. Its line,
                                       ``NAME:domain:DOMAIN:line`` (zset), holds the groups
                                       that found it busy -> when they joined, woken one a
                                       slot
``NAME:ip:ADDRESS``            hash    CLUSTER_IP_RATE: the same for the hosts on one server
                                       address (IPv4 or IPv6), and its line; once two of
                                       its hosts were held lately (its zset ``:refused``,
                                       host -> when), cut (ms) and why: it is held and
                                       its rate halved, back over a minute
``NAME:pace:HOST``             hash    with FRONTIER_SHARDS > 1 and a level rate: HOST's
                                       next send slot (next, ms) and the one reserved for
                                       it (res, ms), kept with its levels' next slots
                                       (claim_levels.lua); expires a minute after them.
                                       There a domain's or an address's ``:booked`` zset
                                       holds slots taken past its next one (ms)
``NAME:lines``                 zset    domains and addresses with a line -> when its next
                                       group is woken (ms): the level's key
``NAME:robots:NETLOC``         string  ROBOTSTXT_SHARED: the host's robots.txt for every node:
                                       'R' then its body (at most 500 KiB), for
                                       ROBOTSTXT_CACHE_TTL; 'P' while the node that
                                       claimed it fetches it
``NAME:digests:BUCKET``        hash    CONTENT_DUPLICATES: 8 bytes of a page's content digest
                                       (its first 2, in hex, are the bucket) -> the URL
                                       that had that content first in the crawl
``NAME:payment_required``      hash    host -> the 402 Payment Required answers it gave
                                       (each page dead-lettered, never retried)
``NAME:near:DOMAIN``           hash    CONTENT_NEAR_DUPLICATES: 'b', a block's number (0-3)
                                       and its 2 bytes -> the 64-bit SimHashes of the
                                       domain's pages with that block (the newest 8);
                                       'u' and a SimHash -> the URL that had it first
                                       (gone once no block keeps the SimHash)
``NAME:params:HOST``           hash    URL_LEARN_PARAMETERS: query parameter -> pairs of
                                       pages that differed only in it with equal content
                                       (dropped from URL_LEARN_PAIRS on), or -1: it
                                       changed a page (kept for good); + ``:pairs``: the
                                       evidence (at most 64 fields, gone an hour after the
                                       host's last page)
``NAME:params_hosts``          set     hosts with a parameter decision (a node reads them
                                       all when it opens)
``NAME:params_learned``        stream  each decision as it changes (h, p, s): every node
                                       reads it each second (the last ~10,000 entries)
``NAME:shards``                string  FRONTIER_SHARDS of a sharded crawl, set by its first node:
                                       a node with another count is refused
``{NAME:K}:...``               -       with FRONTIER_SHARDS > 1, shard K's queue, data, host,
                                       ready, waiting, held, banned, holds, frontier, rates,
                                       crawl_delay, delayed, hostrank, inlinks,
                                       leases, nodes, dupefilter, revisit and due keys (as
                                       above, under the hash tag ``{NAME:K}``); the rest
                                       stay under NAME
=============================  ======  ==================================================
"""

from extensions import capability

#: Who writes each key (docs/reference/keys.md is written from it): aim for one writer.
WRITTEN_BY = {
    "start_urls": "users (LPUSH, scrapy seed); start_lease.lua takes, reclaim.lua gives back",
    "queue": "enqueue*.lua (scheduler flush, scrapy dlq replay), lease.lua, reclaim.lua",
    "data": "enqueue*.lua, lease.lua (retries due), the scheduler's flush (release)",
    "ready": "enqueue*.lua, lease.lua, reclaim.lua",
    "waiting": "enqueue*.lua, lease.lua, host_feedback.lua (holds)",
    "host": "enqueue*.lua (accepted, dropped), lease.lua (next, leased, orate), "
    "host_feedback.lua (holds, adaptive rate), send_slot.lua (next), "
    "hosts/levels.py (dom, ip, ipx)",
    "held": "host_feedback.lua",
    "banned": "host_feedback.lua",
    "holds": "host_feedback.lua; hosts/holds.py (every node reads it)",
    "frontier": "enqueue*.lua, lease.lua, reclaim.lua, refill.lua; spilling.py (host_queue_max); "
    "manifest_join.lua",
    "rates": "politeness.py (each node at start)",
    "crawl_delay": "politeness.py (from robots.txt)",
    "requests": "earlier versions; scheduler.py converts it at open",
    "dupefilter": "enqueue.lua",
    "bloom": "enqueue_bloom.lua; shards created by frontier.py",
    "leases": "lease.lua, the scheduler's flush (release), reclaim.lua",
    "start_leases": "start_lease.lua, the flush or the spider (acknowledge), reclaim.lua",
    "commit": "the scheduler's flush (commit.py)",
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
    "series": "checkpoint.py (every node's heartbeat adds its minute and drops the oldest)",
    "audit": "console/actions.py (each action taken in the console)",
    "dns": "dns/resolver.py (the first node to resolve a host)",
    "domain": "lease.lua, send_slot.lua; claim_levels.lua (sharded)",
    "address": "lease.lua, send_slot.lua, host_feedback.lua (a server that refuses); "
    "claim_levels.lua and address_cut.lua (sharded)",
    "pace": "claim_levels.lua (a sharded frontier's hosts with levels)",
    "lines": "lease.lua",
    "robots": "robotscache.py (the node that fetched it)",
    "digests": "spidermiddlewares/duplicates.py (each node, a page at a time)",
    "payment_required": "downloadermiddlewares/retry.py (the node that had the answer)",
    "near": "spidermiddlewares/nearduplicates.py (each node, a page at a time)",
    "params": "learn_params.lua (from spidermiddlewares/duplicates.py, a page at a time)",
    "params_hosts": "learn_params.lua",
    "params_learned": "learn_params.lua; frontier/params.py (every node reads it)",
}
# the keys the capability packages declare, by the same name
WRITTEN_BY.update({name: key.written_by for name, key in capability.keys().items()})
