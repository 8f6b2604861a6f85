"""Talking to Redis the frontier's way: its Lua scripts (loaded with their shared
prelude), scripts queued on pipelines (EVAL in a transaction, EVALSHA outside,
run again in full where Redis forgot them), and the start key's three shapes."""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from importlib import resources
from typing import TYPE_CHECKING, Any

import redis
from redis.cluster import TransactionStrategy

from extensions import connection

if TYPE_CHECKING:
    from redis.client import Pipeline
    from redis.commands.core import Script

    from extensions.keys import SpiderKeys


#: a script's first line may name the shared pieces (``_*.lua``) it uses
INCLUDE = "--! include "
#: the package of the core scripts; a part's scripts and pieces are in its own,
#: named ``package:name`` (``extensions.frontier.ranks:link_graph``)
CORE = "extensions.frontier.scripts"
#: the core piece that holds the hook slots: a script that includes it gets the
#: crawl's pieces (``manifest.py``), which fill them, after its own
HOOKS = f"{CORE}:_hooks"
_NAME = re.compile(r"^(?:[a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)*:)?_?[a-z][a-z0-9_]*$")
#: a piece in a crawl's manifest: always with its package
PIECE_NAME = re.compile(r"^[a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)*:_[a-z][a-z0-9_]*$")


@functools.cache  # read once a process: a status or health call registers scripts anew
def load_script(name: str, pieces: tuple[str, ...] = ()) -> str:
    """The script ``name`` as Redis gets it: ``script_source`` without its
    comments and indentation. Redis hashes the whole text of every EVAL (a
    transaction's scripts go so: ``run_script``), and the comments were two
    fifths of it; each line stays where it was, so Redis's errors name the
    source's line numbers."""
    return "\n".join(_code_of(line) for line in script_source(name, pieces).split("\n"))


def script_source(name: str, pieces: tuple[str, ...] = ()) -> str:
    """The script ``name`` with the shared pieces it uses, and theirs, before it
    (Lua scripts cannot import one another), each once, a piece before those
    that use it. A script with hook slots (``scripts/_hooks.lua``) also gets
    ``pieces``, the crawl's, after its own and before its body. A name without a
    package is looked for in the including file's package, then the core's."""
    sources: dict[str, str] = {}
    full = qualified(name, CORE)
    text = _read(full)
    for piece in _includes(text, full):
        if piece not in sources:
            _add_with_pieces(piece, sources, (full,))
    if HOOKS in sources:
        for piece in pieces:
            if piece not in sources:
                _add_with_pieces(qualified(piece, CORE), sources, (full,))
    sources[full] = text
    return "".join(sources.values())


def qualified(name: str, package: str) -> str:
    """``name`` as ``package:name``: a bare name is ``package``'s when it has
    that file, else the core's."""
    if not _NAME.match(name):
        raise ValueError(f"not a Lua script's name: {name!r}")
    if ":" in name:
        return name
    if package != CORE and resources.files(package).joinpath(f"{name}.lua").is_file():
        return f"{package}:{name}"
    return f"{CORE}:{name}"


def _read(full: str) -> str:
    package, _, name = full.partition(":")
    try:
        return resources.files(package).joinpath(f"{name}.lua").read_text()
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        raise ValueError(f"no Lua script {full}: {exc}") from None


def _includes(text: str, full: str) -> list[str]:
    first = text.partition("\n")[0]
    if not first.startswith(INCLUDE):
        return []
    package = full.partition(":")[0]
    return [qualified(piece, package) for piece in first[len(INCLUDE) :].split()]


def _code_of(line: str) -> str:
    """A Lua line less its indentation and its comment (a ``--`` outside
    quotes: the scripts use no long strings nor escaped quotes)."""
    line = line.strip()
    at = line.find("--")
    while at >= 0:
        before = line[:at]
        if before.count("'") % 2 == 0 and before.count('"') % 2 == 0:
            return before.rstrip()
        at = line.find("--", at + 2)
    return line


def _add_with_pieces(full: str, sources: dict[str, str], using: tuple[str, ...]) -> None:
    if full in using:
        raise ValueError(f"Lua pieces include one another: {' -> '.join((*using, full))}")
    text = _read(full)
    for piece in _includes(text, full):
        if piece not in sources:
            _add_with_pieces(piece, sources, (*using, full))
    sources[full] = text


def run_script(script: Script, keys: list, args: list, pipe: Pipeline | None = None):
    """Call ``script``, or queue it on ``pipe`` (its result then comes from
    ``execute(pipe)``).

    In a transaction the script goes as EVAL, carrying itself: a script Redis
    does not know (after a restart or a failover) would fail inside the
    transaction, which cannot be run again in part; and redis-py would send
    SCRIPT EXISTS before every execute. Outside one it goes as EVALSHA, 40
    bytes instead of a few KB that Redis would hash on every call (a sharded
    flush sends one per shard it touches); ``execute`` runs any that Redis no
    longer knows again in full.
    """
    if pipe is None:
        return script(keys=keys, args=args)
    if _in_transaction(pipe):
        return pipe.execute_command("EVAL", script.script, len(keys), *keys, *args)
    queued: dict[int, tuple[Script, list, list]] = pipe.__dict__.setdefault(_BY_HASH, {})
    queued[len(pipe)] = (script, keys, args)
    return pipe.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)


def run_named(
    script: Script,
    keys: dict[str, str],
    args: dict[str, Any],
    pipe: Pipeline | None = None,
    items: Sequence[Any] = (),
):
    """``run_script`` for a script that takes its keys and arguments by name, and
    a list of ``items`` after them (``scripts/_named.lua``); ``fields`` reads a
    result it returns by name."""
    argv = [",".join(keys), ",".join(args), *args.values(), *items]
    return run_script(script, list(keys.values()), argv, pipe)


def fields(result: Sequence[Any]) -> dict[str, Any]:
    """A script's result by name (a flat list of name, value pairs)."""
    return {connection.text(result[i]): result[i + 1] for i in range(0, len(result) - 1, 2)}


_BY_HASH = "_scripts_by_hash"  # on a pipeline: its EVALSHA commands, by position


def _in_transaction(pipe: Pipeline) -> bool:
    strategy = getattr(pipe, "_execution_strategy", None)
    if strategy is not None:  # a cluster pipeline (its ``transaction`` is a method)
        return isinstance(strategy, TransactionStrategy)
    return bool(pipe.transaction)


def execute(pipe: Pipeline, *, raise_on_error: bool = True) -> list[Any]:
    """``pipe.execute()``; each script Redis did not know is loaded and run
    again on its own (it did not run: NOSCRIPT), in its place in the results."""
    results = pipe.execute(raise_on_error=False)
    for index, (script, keys, args) in pipe.__dict__.pop(_BY_HASH, {}).items():
        if isinstance(results[index], redis.exceptions.NoScriptError):
            try:
                results[index] = script(keys=keys, args=args)  # loads it, then runs it
            except redis.RedisError as exc:
                results[index] = exc
    if raise_on_error:
        failed = next((r for r in results if isinstance(r, Exception)), None)
        if failed is not None:
            raise failed
    return results


def push_start_entries(
    client: redis.Redis | Pipeline,
    keys: SpiderKeys,
    entries: Sequence[bytes | str],
    *,
    back: bool = False,
    score: float = 0,
) -> None:
    """Add entries to the start key, read in the order given; ``back`` puts
    entries that were taken before where they are read first (a sorted set
    gives them ``score`` unless ``back``, which gives its highest score)."""
    if not entries:
        return
    if keys.start_type == "set":
        client.sadd(keys.start_urls, *entries)
    elif keys.start_type == "zset":
        if back:
            top: Any = client.zrevrange(keys.start_urls, 0, 0, withscores=True)
            score = top[0][1] if top else 0
        client.zadd(keys.start_urls, dict.fromkeys(entries, score))  # type: ignore[type-var]
    elif back:
        client.rpush(keys.start_urls, *reversed(entries))
    else:
        client.lpush(keys.start_urls, *entries)
