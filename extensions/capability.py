"""Capabilities declared in their own packages.

A capability package (host ranks, say) holds a ``declared.py`` whose
``CAPABILITY`` says what it brings to the stack: its settings, each with its
default, its meaning and its check; the Redis keys it keeps, each with its
type, what it holds and who writes it; and the components it adds, Scrapy's
way ({class path: order}): frontier parts, downloader and spider middlewares.

The stack iterates the capabilities ``DECLARED`` lists: the defaults
(``defaults.py``), the checks at start (``config.py``), the keys
(``keys.SpiderKeys.named``, ``keyspace.py``, the reference pages), the parts
(``FRONTIER_PARTS_BASE``), the middlewares (``addon.py``) and the meta keys
that steer a request (``meta.py``). A new capability
is its package and one line here.

A declaration is data: ``declared.py`` imports nothing above
``extensions.settingchecks``, as ``defaults.py`` loads it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

#: (settings, name) -> what is wrong with the setting's value, or None
#: (``extensions/settingchecks.py`` has the usual ones)
Check = Callable[["BaseSettings", str], "str | None"]

#: the modules whose CAPABILITY the stack takes in, in order
DECLARED = (
    "extensions.api.declared",
    "extensions.documents.declared",
    "extensions.frontier.crawls.declared",
    "extensions.frontier.hosts.declared",
    "extensions.frontier.overflow.declared",
    "extensions.frontier.ranks.declared",
    "extensions.paycrawl.declared",
    "extensions.pipelines.declared",
    "extensions.purpose.declared",
    "extensions.recrawl.declared",
    "extensions.render.declared",
    "extensions.scope.declared",
    "extensions.warc.declared",
    "extensions.webhooks.declared",
    "extensions.wire.declared",
)


@dataclass(frozen=True)
class Setting:
    default: Any
    #: what it does, as the settings reference says it
    meaning: str
    #: (settings, name) -> what is wrong with its value, or None
    check: Check | None = None


@dataclass(frozen=True)
class Key:
    #: under ``%(name)s`` (the spider's prefix), with ``%(...)s`` for a part: a host...
    template: str
    type: str
    holds: str
    written_by: str
    #: kept in each shard of a sharded frontier (under ``{NAME:K}``)
    sharded: bool = False
    #: the crawl's state: forgotten with it (SCHEDULER_FLUSH_ON_START, a finished crawl);
    #: only a key named by ``%(name)s`` alone
    crawl_state: bool = False


@dataclass(frozen=True)
class Capability:
    name: str
    #: what it is, for the reference pages
    about: str = ""
    settings: Mapping[str, Setting] = field(default_factory=dict)
    keys: Mapping[str, Key] = field(default_factory=dict)
    frontier_parts: Mapping[str, int] = field(default_factory=dict)
    downloader_middlewares: Mapping[str, int] = field(default_factory=dict)
    spider_middlewares: Mapping[str, int] = field(default_factory=dict)
    #: Scrapy extensions (EXTENSIONS), each off by raising NotConfigured
    extensions: Mapping[str, int] = field(default_factory=dict)
    #: request.meta keys it steers a request with: {key: whether a value is one
    #: the stack can use} (``extensions.meta``: a start entry never sets one, a
    #: queue entry's must hold)
    control_meta: Mapping[str, Callable[[Any], bool]] = field(default_factory=dict)


# (each read once: keys.SpiderKeys.named asks at every call; what they return is
# shared, never to be changed by a caller)
@functools.cache
def declared() -> tuple[Capability, ...]:
    """The declared capabilities; two that name one setting or key are refused."""
    capabilities = tuple(import_module(path).CAPABILITY for path in DECLARED)
    for kind in ("settings", "keys"):
        seen: dict[str, str] = {}
        for capability in capabilities:
            for name in getattr(capability, kind):
                if name in seen:
                    raise ValueError(
                        f"capabilities {seen[name]} and {capability.name} both declare {name}"
                    )
                seen[name] = capability.name
    return capabilities


@functools.cache
def settings() -> dict[str, Setting]:
    return {name: s for c in declared() for name, s in c.settings.items()}


@functools.cache
def keys() -> dict[str, Key]:
    return {name: k for c in declared() for name, k in c.keys.items()}


@functools.cache
def control_meta() -> dict[str, Callable[[Any], bool]]:
    return {key: check for c in declared() for key, check in c.control_meta.items()}


@functools.cache
def components(kind: str) -> dict[str, int]:
    """``kind``: "frontier_parts", "downloader_middlewares", "spider_middlewares"
    or "extensions"."""
    return {path: order for c in declared() for path, order in getattr(c, kind).items()}
