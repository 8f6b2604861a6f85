"""The crawl's manifest: the parts' Lua pieces that fill the core scripts' hook
slots (``scripts/_hooks.lua``), kept in ``NAME:frontier`` (field ``pieces``; the
first shard's on a sharded frontier) so that every node of a crawl runs the
same scripts.

A node joins its parts' pieces to it as it opens (a union: a piece stays for
the crawl's life, as a node that brought it may come back), and whoever runs
the scripts reads it again every ``MANIFEST_TTL`` seconds, so a node that
opened before another brought a piece runs it from then on. Where no node has
written one yet (a tool, a crawl begun by an earlier version), the manifest is
every bundled part's pieces: a piece does nothing where the crawl's data says
it is not used, so more pieces than needed cost a little time, never a
different result.

What Redis holds is read as another writer's: a name that is no piece's name
is left out, logged and counted; a piece this node cannot run (a project's
part it was not given) stops it at open with a line that says which, and later
is logged while the node goes on with the scripts it has.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import redis
from scrapy.utils.conf import build_component_list
from scrapy.utils.misc import load_object

from extensions import connection, defaults
from extensions.frontier.redisops import PIECE_NAME, load_script, run_named, script_source

if TYPE_CHECKING:
    from redis.commands.core import Script

    from extensions.keys import SpiderKeys

logger = logging.getLogger(__name__)

FIELD = "pieces"  # in NAME:frontier
MANIFEST_TTL = 10.0  # seconds a manifest read stands


#: the pieces of every part this process was given (``part.build_parts`` adds
#: them): its other readers of the manifest (the link graph, a crawl's drain)
#: run the crawl's scripts with them too
_RUNNABLE: set[str] = set()


def runnable(pieces: Iterable[str]) -> None:
    _RUNNABLE.update(pieces)


class ManifestError(ValueError):
    """The crawl's manifest names a piece this node cannot run."""


@functools.cache
def bundled() -> tuple[str, ...]:
    """The pieces of every part the project ships, in name order (the parts
    loaded by name, as Scrapy loads components: the core knows none of them)."""
    paths = build_component_list(defaults.FRONTIER_PARTS_BASE)
    return tuple(sorted({piece for path in paths for piece in load_object(path).lua_pieces}))


@functools.cache
def has_slots(name: str) -> bool:
    """Whether the script ``name`` calls the hook slots (gets the crawl's pieces)."""
    return script_source("_hooks") in script_source(name)


class Manifest:
    """One crawl's manifest, as one node (or tool) reads it, and its scripts."""

    def __init__(
        self, server: redis.Redis, keys: SpiderKeys, known: Iterable[str] = (), stats: Any = None
    ):
        self.server = server
        #: in the first shard's hash: NAME:frontier itself says a crawl is unsharded
        self.key = keys.shard(0).frontier
        self.stats = stats
        self.known = set(bundled()) | set(known)
        self._pieces: tuple[str, ...] | None = None
        self._read_at = 0.0
        self._scripts: dict[tuple[str, tuple[str, ...]], Script] = {}
        self._join = server.register_script(load_script("manifest_join"))

    @property
    def pieces(self) -> tuple[str, ...]:
        """The pieces the crawl's scripts carry, as last read (at most
        MANIFEST_TTL seconds ago)."""
        if self._pieces is None:
            self._pieces = self._read()
        elif time.monotonic() - self._read_at >= MANIFEST_TTL:
            self.refresh()
        return self._pieces

    def join(
        self, pieces: Iterable[str], known: Iterable[str] = (), stats: Any = None
    ) -> tuple[str, ...]:
        """Add ``pieces`` (this node's parts') to the crawl's manifest; raises
        ManifestError if it names one this node cannot run (neither bundled nor
        ``known``: the pieces of the parts this node was given). ``stats``: the
        node's, which count what the manifest holds that is no piece."""
        self.known |= set(known)
        self.stats = stats if stats is not None else self.stats
        wanted = sorted(set(pieces))
        for piece in wanted:
            if not PIECE_NAME.match(piece):
                raise ManifestError(
                    f"{piece!r} is no Lua piece's name: a part's lua_pieces are "
                    "'package:_name' (extensions.frontier.ranks:_ranks)"
                )
            script_source(piece)  # raises ValueError naming a piece that is not there
        self.known |= set(wanted)
        joined = run_named(self._join, {"frontier": self.key}, {}, items=wanted)
        self._pieces = self._parse(joined)
        self._read_at = time.monotonic()
        return self._pieces

    def refresh(self) -> bool:
        """Read the manifest again; True if the scripts change with it. What
        cannot be read leaves the pieces as they were (the next read tries again)."""
        try:
            pieces = self._read()
        except ManifestError as exc:
            self._read_at = time.monotonic()
            logger.error("%s; this node goes on with the pieces it has", exc)
            return False
        except redis.RedisError:
            return False  # the operation about to run meets the same Redis and says so
        changed = pieces != self._pieces
        if changed and self._pieces is not None:
            logger.info("the crawl's pieces are now %s", ", ".join(pieces) or "none")
        self._pieces = pieces
        return changed

    def script(self, name: str) -> Script:
        """The script ``name``, with the crawl's pieces if it has hook slots."""
        pieces = self.pieces if has_slots(name) else ()
        script = self._scripts.get((name, pieces))
        if script is None:
            script = self.server.register_script(load_script(name, pieces))
            self._scripts[(name, pieces)] = script
        return script

    def _read(self) -> tuple[str, ...]:
        raw = self.server.hget(self.key, FIELD)
        self._read_at = time.monotonic()
        if raw is None:
            return bundled()
        return self._parse(raw)

    def _parse(self, raw: bytes | str) -> tuple[str, ...]:
        pieces = []
        for name in connection.text(raw).split(","):
            if not name:
                continue
            if ":" not in name or not PIECE_NAME.match(name):
                logger.warning("the crawl's manifest names %r, which is no piece: left out", name)
                if self.stats is not None:
                    self.stats.inc_value("frontier/manifest/malformed")
                continue
            if name not in self.known and name not in _RUNNABLE:
                raise ManifestError(
                    f"the crawl's manifest ({self.key} '{FIELD}') names the Lua piece "
                    f"{name}, which no part of this node declares: give this node the part that "
                    "brings it (FRONTIER_PARTS), as the other nodes of the crawl have it"
                )
            pieces.append(name)
        return tuple(sorted(set(pieces)))
