"""A sharded crawl's shard count, as Redis recorded it: what a node must match,
and what a command reads the crawl with."""

from __future__ import annotations

import dataclasses
from typing import Any

from extensions import connection, keys


def shards_problem(server: Any, spider_keys: keys.SpiderKeys) -> str | None:
    """Why the crawl in Redis cannot be run with FRONTIER_SHARDS as set, or None:
    a URL's shard follows the shard count, so another count would look for what
    was seen, and queued, in the wrong shards."""
    if spider_keys.auto_shards:
        return None  # the node adopts the count the crawl recorded
    stored = server.get(spider_keys.shards_key)
    shards = spider_keys.shards
    if stored is None:
        if shards == 1:
            return None
        unsharded = (spider_keys.frontier, spider_keys.dupefilter, spider_keys.bloom_count)
        if not server.exists(*unsharded):
            return None
        was = "1"
    else:
        was = connection.text(stored)
        if was == str(shards):
            return None
    return (
        f"the crawl of {spider_keys.name} in Redis was started with FRONTIER_SHARDS={was}; "
        f"this node has FRONTIER_SHARDS={shards}: set it back to {was} (a crawl cannot "
        "change its shard count), or clear the crawl first"
    )


def as_recorded(server: Any, spider_keys: keys.SpiderKeys) -> keys.SpiderKeys:
    """The keys with the shard count the crawl in Redis recorded: a command
    (status, dlq) reads and writes the crawl as it is, whatever FRONTIER_SHARDS
    the machine it runs on has."""
    stored = server.get(spider_keys.shards_key)
    try:
        shards = int(stored) if stored is not None else spider_keys.shards
    except ValueError:
        return spider_keys  # not a count: shards_problem says so
    if shards < 1:
        return spider_keys
    return dataclasses.replace(spider_keys, shards=shards, auto_shards=False)


def record_shards(server: Any, spider_keys: keys.SpiderKeys) -> None:
    """Check FRONTIER_SHARDS against the crawl in Redis, and record it for the
    nodes that join later (`scrapy crawl` has said why before a node gets here;
    this catches a node that started otherwise, or two that raced)."""
    problem = shards_problem(server, spider_keys)
    if problem is None and spider_keys.shards > 1:
        server.set(spider_keys.shards_key, spider_keys.shards, nx=True)
        problem = shards_problem(server, spider_keys)
    if problem:
        raise RuntimeError(problem)
