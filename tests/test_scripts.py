"""The Lua scripts and the shared pieces they include (scripts/_*.lua)."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

import pytest

from extensions.frontier.redisops import CORE, INCLUDE, load_script, qualified, script_source

ROOT = Path(__file__).resolve().parent.parent


def _package_of(path: Path) -> str:
    return ".".join(path.parent.relative_to(ROOT).parts)


# every Lua file of the project, core or a part's, by its full name (package:name)
FILES = sorted(f"{_package_of(path)}:{path.stem}" for path in (ROOT / "extensions").rglob("*.lua"))
PIECES = [name for name in FILES if name.partition(":")[2].startswith("_")]
SCRIPTS = [name for name in FILES if name not in PIECES]


def source(name: str) -> str:
    package, _, stem = qualified(name, CORE).partition(":")
    return resources.files(package).joinpath(f"{stem}.lua").read_text()


def defined(piece: str) -> set[str]:
    text = source(piece)
    names = set(re.findall(r"^local function (\w+)", text, re.M))
    for group in re.findall(r"^local ([A-Z_][A-Z_0-9, ]*?)\s*=", text, re.M):
        names |= {name.strip() for name in group.split(",")}
    return names


def visible(name: str) -> list[str]:
    """The pieces a file may include: the core's and its own package's."""
    package = name.partition(":")[0]
    return [p for p in PIECES if p.partition(":")[0] in (CORE, package)]


def used_pieces(name: str) -> list[str]:
    code = re.sub(r"--[^\n]*", "", source(name))
    code = re.sub(r"'[^'\n]*'", "''", code)  # a name in a string ('push') is no use of it
    return [
        piece
        for piece in visible(name)
        if piece != name and any(re.search(rf"\b{re.escape(n)}\b", code) for n in defined(piece))
    ]


def declared(name: str) -> list[str]:
    first = source(name).partition("\n")[0]
    package = name.partition(":")[0]
    names = first[len(INCLUDE) :].split() if first.startswith(INCLUDE) else []
    return [qualified(piece, package) for piece in names]


def test_the_project_has_core_and_part_scripts():
    assert f"{CORE}:lease" in SCRIPTS and f"{CORE}:_hooks" in PIECES
    assert any(not name.startswith(CORE) for name in PIECES)


@pytest.mark.parametrize("name", FILES)
def test_each_script_includes_exactly_the_pieces_it_uses(name):
    assert sorted(declared(name)) == sorted(used_pieces(name))


@pytest.mark.parametrize("name", SCRIPTS)
def test_a_loaded_script_has_each_piece_once_before_what_uses_it(name):
    text = script_source(name, tuple(p for p in PIECES if not p.startswith(CORE)))
    for piece in PIECES:
        first_line = source(piece).partition("\n")[0]
        heading = source(piece).split("\n")[1 if first_line.startswith(INCLUDE) else 0]
        assert text.count(heading) <= 1
    order = [piece for piece in PIECES if source(piece) in text]
    for piece in order:
        for needed in declared(piece):
            assert text.index(source(needed)) < text.index(source(piece))
    assert text.endswith(source(name))


def test_a_piece_no_longer_used_is_not_loaded():
    assert source("_dupefilter") not in script_source("send_slot")
    assert source("_pacing") in script_source("send_slot")
    # _queues uses _crawls: a script that includes _queues gets both
    assert source("_crawls") in script_source("extensions.frontier.overflow:overflow_take")


def test_the_crawls_pieces_fill_the_slots_of_the_scripts_that_have_them():
    ranks = "extensions.frontier.ranks:_ranks"
    assert source(ranks) in script_source("lease", (ranks,))
    assert source(ranks) not in script_source("lease")
    # a script without slots gets no pieces: its text, and hash, stay one
    assert script_source("frontier", (ranks,)) == script_source("frontier")


def test_a_name_that_is_no_script_is_refused():
    with pytest.raises(ValueError, match="not a Lua script"):
        script_source("../etc/passwd")
    with pytest.raises(ValueError, match="no Lua script"):
        script_source("extensions.frontier.ranks:_nothing")


@pytest.mark.parametrize("name", [name for name in FILES if name != f"{CORE}:_named"])
def test_every_script_takes_its_keys_and_arguments_by_name(name):
    code = re.sub(r"--[^\n]*", "", source(name))
    assert "KEYS[" not in code and "ARGV[" not in code
    if name in SCRIPTS:
        assert f"{CORE}:_named" in declared(name)


def test_a_script_goes_to_redis_without_its_comments_line_for_line():
    source_lines = script_source("enqueue").split("\n")
    sent_lines = load_script("enqueue").split("\n")
    assert len(sent_lines) == len(source_lines)  # Redis's errors name the source's lines
    for line, sent in zip(source_lines, sent_lines, strict=True):
        code = line.strip()
        if code.startswith("--"):
            assert sent == ""
        else:
            assert code.startswith(sent) and "--" not in sent
    assert len(load_script("lease")) < 0.6 * len(script_source("lease"))


@pytest.mark.parametrize("name", FILES)
def test_no_script_uses_what_the_comment_stripping_cannot_read(name):
    # long strings and escaped quotes could hide a '--' that is not a comment
    code = re.sub(r"--[^\n]*", "", source(name))
    assert "[[" not in code and "\\'" not in code and '\\"' not in code


def test_a_dash_pair_inside_quotes_is_kept():
    from extensions.frontier.redisops import _code_of

    assert _code_of("  local s = 'a--b' .. \"--\"  -- a note") == "local s = 'a--b' .. \"--\""
    assert _code_of("-- all comment") == ""
