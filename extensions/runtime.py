"""What every component of one crawler shares, built once and found through one
accessor (``runtime_of(crawler)``): its node id, its Redis client, the shard
count it resolved, and each package's own state for that crawler.

A package keeps its state here through ``state_of`` and offers a typed
accessor of its own (``sent_for``, ``warc_state``, ``robots_state``...), so no
component reaches into another's state but through that package's accessor, and
this module names no package. redis-py's clients are safe to share: each
command takes a connection from the client's pool.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import redis
    from scrapy.crawler import Crawler

T = TypeVar("T")


@dataclass
class Runtime:
    #: this node's id (NODE_ID, else host-pid-random): cluster.checkpoint.node_id_for
    node_id: str | None = None
    #: the shared Redis client: connection.client_for
    server: redis.Redis | None = None
    #: FRONTIER_SHARDS = "auto" as resolved against Redis: keys.SpiderKeys.for_crawler
    shards: int | None = None
    #: what keeps the item store from taking items now ("" when nothing): the
    #: pipeline says it, the node's heartbeat record shows it (``scrapy status``)
    store_problem: str = ""
    #: each package's own state, by its key (``state_of``)
    states: dict[Hashable, Any] = field(default_factory=dict)


_runtimes: weakref.WeakKeyDictionary[Crawler, Runtime] = weakref.WeakKeyDictionary()


def runtime_of(crawler: Crawler) -> Runtime:
    """The crawler's runtime, built on first use."""
    runtime = _runtimes.get(crawler)
    if runtime is None:
        runtime = _runtimes[crawler] = Runtime()
    return runtime


def state_of(crawler: Crawler, key: Hashable, make: Callable[[], T]) -> T:
    """A package's state under ``key`` for this crawler, built by ``make`` on
    first use (the package's typed accessor is the way in)."""
    states = runtime_of(crawler).states
    if key not in states:
        states[key] = make()
    state: T = states[key]
    return state


def set_state(crawler: Crawler, key: Hashable, value: Any) -> None:
    """Put a package's state built elsewhere (a resolver, a gate) under ``key``."""
    runtime_of(crawler).states[key] = value


def peek_state(crawler: Crawler, key: Hashable) -> Any:
    """The state under ``key``, or None when nothing built it yet."""
    return runtime_of(crawler).states.get(key)
