"""The frontier's capabilities as parts, named in settings like Scrapy's middlewares.

The core of a node's frontier is its leases: the buffer it leases into, what it
owes Redis until its next flush, and the flush itself (``node.py``). Everything
else a crawl may or may not have (crawl ids, the render lane, recrawls with a
status store outside Redis, the MongoDB overflow, and the ones to come) is a
``FrontierPart``: a class named in ``FRONTIER_PARTS`` with an order, built by
``from_context`` (raising ``NotConfigured`` to stay out, as a Scrapy
middleware does), and called at the few points where a capability meets the
core. A part is given a ``PartContext`` (``context.py``), never the node: the
crawl's Redis and keys, the node's id, stats and health, and the extension
points it may add to (admission checks, release gates, write sections). A part
overrides only the hooks it needs; the others cost nothing, as ``Parts`` calls
each hook on the parts that override it alone.

A part also owns what the crawl's status shows of it (``scrapy status``, the
console, the metrics): classmethods, as status is read outside any node, by
``StatusParts`` from the same setting.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from scrapy.exceptions import NotConfigured
from scrapy.utils.conf import build_component_list
from scrapy.utils.misc import load_object

from extensions import defaults
from extensions.frontier import manifest
from extensions.installed import components_problem

if TYPE_CHECKING:
    import redis
    from scrapy import Request, Spider
    from scrapy.settings import BaseSettings

    from extensions.frontier.context import PartContext
    from extensions.frontier.frontier import Frontier
    from extensions.frontier.results import FrontierSizes, Lease
    from extensions.keys import SpiderKeys

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class StatusView:
    """What a part's status is read from: the crawl's Redis and its sizes now."""

    server: redis.Redis
    keys: SpiderKeys
    #: the crawl's frontier, read as no node (``node_id=""``)
    frontier: Frontier
    sizes: FrontierSizes
    now: float
    node_timeout: float
    hours_ahead: int = 24
    #: RECRAWL_STORE = "mongo": where the kept pages' records are (else Redis)
    status_store: Any = None


class FrontierPart:
    """One capability of the frontier. Every hook is optional."""

    #: the status fields the console shows among a spider's figures, {field: label}
    figures: ClassVar[dict[str, str]] = {}
    #: the Lua pieces (``package:_name``, a ``_name.lua`` in the package) this part
    #: may add to the core scripts' hook slots (``scripts/_hooks.lua``)
    lua_pieces: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def status(cls, view: StatusView) -> dict[str, Any]:
        """Fields this capability adds to the crawl's status (``--json``)."""
        return {}

    @classmethod
    def status_lines(cls, status: dict[str, Any]) -> list[str]:
        """Lines ``scrapy status`` prints of its fields."""
        return []

    @classmethod
    def node_status(cls, record: dict[str, str]) -> dict[str, Any]:
        """Fields of a node's row, read from what ``checkpoint`` wrote."""
        return {}

    @classmethod
    def node_notes(cls, row: dict[str, Any]) -> list[str]:
        """What a node's row says of it, after its figures."""
        return []

    @classmethod
    def from_context(cls, context: PartContext) -> FrontierPart:
        return cls()

    def pieces(self) -> tuple[str, ...]:
        """The Lua pieces this crawl needs of this part (joined to the crawl's
        manifest as the node opens: ``manifest.py``); all it may add unless it
        says otherwise."""
        return self.lua_pieces

    def open(self, spider: Spider) -> None:
        """The node has joined the crawl (its leftover leases reclaimed): start."""

    def enqueued(self, request: Request) -> None:
        """A request was admitted to the frontier (queued or parked)."""

    def lease_room(self, room: int) -> int:
        """How many requests the next lease may ask for: a part may lower it.
        At 0 nothing is leased and the node does not back off: the part wakes it
        (``context.wake``) once it has room again, as the overflow part does
        when MongoDB takes its spills."""
        return room

    def lease_shares(self) -> dict[str, int]:
        """Counts the lease script takes besides, by its argument's name (asked
        at the flush that leases, once finished requests are counted out; split
        over the shards a lease asks in proportion): the render part's
        ``render_count``, the render requests this node has room for."""
        return {}

    def leased(self) -> None:
        """A lease came back (what it said of hosts: ``frontier.host_notes``)."""

    def admit_leases(self, leases: list[Lease], asked_ms: int) -> list[Lease]:
        """The leases the node sends, of those a lease call begun at ``asked_ms``
        gave it: a part may change their send slots, or give some back."""
        return leases

    def took(self, request: Request) -> None:
        """The engine took a leased request from the buffer."""

    def finished(self, request: Request) -> None:
        """The engine is done with a leased request (its lease goes at the next flush)."""

    def before_flush(self) -> None:
        """A flush is about to write what the node owes the frontier."""

    def heartbeat(self) -> None:
        """The node's duty for the cluster, once a heartbeat (in the reactor;
        a ``redis.RedisError`` is the node's health's to report)."""

    def idle_pending(self, pending: int, sizes: FrontierSizes, now: float) -> int:
        """Of the cluster's pending work, what this idle node waits for."""
        return pending

    def checkpoint(self) -> dict[str, Any]:
        """Fields this part adds to the node's heartbeat record."""
        return {}

    def close(self) -> None:
        """The node is closing: before its last flush."""

    def closed(self) -> None:
        """The node's last flush is done."""


HOOKS = [name for name, value in vars(FrontierPart).items() if callable(value) and
         not isinstance(value, classmethod) and not name.startswith("_")]  # fmt: skip


class Parts:
    """The parts a node runs, in their order; each hook calls only the parts
    that override it."""

    def __init__(self, parts: list[FrontierPart], declared_pieces: frozenset[str] = frozenset()):
        self.parts = parts
        #: the Lua pieces of every part named, left out or not: this node can run them
        self.declared_pieces = declared_pieces
        self._by_hook = {
            hook: [getattr(p, hook) for p in parts
                   if getattr(type(p), hook) is not getattr(FrontierPart, hook)]
            for hook in HOOKS
        }  # fmt: skip
        self.takes = bool(self._by_hook["took"])
        self.enqueues = bool(self._by_hook["enqueued"])

    def __iter__(self) -> Any:
        return iter(self.parts)

    def get(self, kind: type[FrontierPart]) -> Any:
        """The part of that class, or None when it stayed out."""
        return next((p for p in self.parts if isinstance(p, kind)), None)

    def call(self, hook: str, *args: Any) -> None:
        for method in self._by_hook[hook]:
            method(*args)

    def enqueued(self, request: Request) -> None:
        for method in self._by_hook["enqueued"]:
            method(request)

    def took(self, request: Request) -> None:
        for method in self._by_hook["took"]:
            method(request)

    def lease_room(self, room: int) -> int:
        for method in self._by_hook["lease_room"]:
            room = method(room)
        return room

    def admit_leases(self, leases: list[Lease], asked_ms: int) -> list[Lease]:
        for method in self._by_hook["admit_leases"]:
            leases = method(leases, asked_ms)
        return leases

    def pieces(self) -> list[str]:
        return [piece for part in self.parts for piece in part.pieces()]

    def lease_shares(self) -> dict[str, int]:
        shares: dict[str, int] = {}
        for method in self._by_hook["lease_shares"]:
            for name, count in method().items():
                shares[name] = shares.get(name, 0) + count
        return shares

    def idle_pending(self, pending: int, sizes: FrontierSizes, now: float) -> int:
        for method in self._by_hook["idle_pending"]:
            pending = method(pending, sizes, now)
        return pending

    def checkpoint(self) -> dict[str, Any]:
        fields: dict[str, Any] = {}
        for method in self._by_hook["checkpoint"]:
            fields.update(method())
        return fields


def parts_problem(settings: BaseSettings, name: str) -> str | None:
    """What is wrong with a FRONTIER_PARTS setting: it must be {class path: order
    or None}, each path a FrontierPart (``config.py`` runs this at start)."""
    return components_problem(
        settings, name, '"myproject.parts.Mine": 500',
        lambda part: None if isinstance(part, type) and issubclass(part, FrontierPart)
        else "must be a FrontierPart (extensions.frontier.part)",
    )  # fmt: skip


def part_classes(settings: BaseSettings | None = None) -> list[type[FrontierPart]]:
    """The part classes FRONTIER_PARTS names over FRONTIER_PARTS_BASE, in order
    (without settings: the ones the project ships)."""
    if settings is None:
        paths = build_component_list(defaults.FRONTIER_PARTS_BASE)
    else:
        paths = build_component_list(settings.getwithbase("FRONTIER_PARTS"))
    return [load_object(path) for path in paths]


class StatusParts:
    """The parts' share of a crawl's status, read outside any node: every part
    named, whether a node would start it or not (its fields read as none)."""

    def __init__(self, classes: list[type[FrontierPart]]):
        self.classes = classes
        self.figures = {k: v for cls in classes for k, v in cls.figures.items()}

    @classmethod
    def from_settings(cls, settings: BaseSettings | None = None) -> StatusParts:
        return cls(part_classes(settings))

    def status(self, view: StatusView) -> dict[str, Any]:
        return {k: v for cls in self.classes for k, v in cls.status(view).items()}

    def lines(self, status: dict[str, Any]) -> list[str]:
        return [line for cls in self.classes for line in cls.status_lines(status)]

    def node_status(self, record: dict[str, str]) -> dict[str, Any]:
        return {k: v for cls in self.classes for k, v in cls.node_status(record).items()}

    def node_notes(self, row: dict[str, Any]) -> list[str]:
        return [note for cls in self.classes for note in cls.node_notes(row)]


def build_parts(context: PartContext) -> Parts:
    """FRONTIER_PARTS over FRONTIER_PARTS_BASE, Scrapy's way: {class path: order},
    None leaves a part out."""
    parts = []
    classes = part_classes(context.settings)
    for cls in classes:
        if "from_node" in vars(cls):
            raise TypeError(
                f"{cls.__module__}.{cls.__qualname__} defines from_node(node): a frontier "
                "part is built by from_context(context) now (extensions.frontier.context)"
            )
        try:
            parts.append(cls.from_context(context))
        except NotConfigured as exc:
            if exc.args:
                logger.info(
                    "frontier part %s.%s left out: %s",
                    cls.__module__,
                    cls.__qualname__,
                    exc.args[0],
                )
    declared = frozenset(piece for cls in classes for piece in cls.lua_pieces)
    manifest.runnable(declared)
    return Parts(parts, declared)
