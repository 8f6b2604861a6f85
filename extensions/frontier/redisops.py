"""Talking to Redis the frontier's way: its Lua scripts (loaded with their shared
prelude), scripts queued on pipelines (EVAL in a transaction, EVALSHA outside,
run again in full where Redis forgot them), and the start key's three shapes."""

from __future__ import annotations

import functools
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


#: a script's first line may name the shared pieces (``scripts/_*.lua``) it uses
INCLUDE = "--! include "


@functools.cache  # read once a process: a status or health call registers scripts anew
def load_script(name: str) -> str:
    """The script ``name`` as Redis gets it: ``script_source`` without its
    comments and indentation. Redis hashes the whole text of every EVAL (a
    transaction's scripts go so: ``run_script``), and the comments were two
    fifths of it; each line stays where it was, so Redis's errors name the
    source's line numbers."""
    return "\n".join(_code_of(line) for line in script_source(name).split("\n"))


def script_source(name: str) -> str:
    """The script ``name`` with the shared pieces it uses, and theirs, before it
    (Lua scripts cannot import one another), each once, a piece before those
    that use it."""
    sources: dict[str, str] = {}
    _add_with_pieces(name, sources, ())
    return "".join(sources.values())


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


def _add_with_pieces(name: str, sources: dict[str, str], using: tuple[str, ...]) -> None:
    if name in using:
        raise ValueError(f"Lua pieces include one another: {' -> '.join((*using, name))}")
    text = resources.files("extensions.frontier.scripts").joinpath(f"{name}.lua").read_text()
    first = text.partition("\n")[0]
    if first.startswith(INCLUDE):
        for piece in first[len(INCLUDE) :].split():
            if piece not in sources:
                _add_with_pieces(piece, sources, (*using, name))
    sources[name] = text


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
