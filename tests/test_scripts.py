"""The Lua scripts and the shared pieces they include (scripts/_*.lua)."""

from __future__ import annotations

import re
from importlib import resources

import pytest

from extensions.frontier.redisops import INCLUDE, load_script, script_source

SCRIPTS = resources.files("extensions.frontier.scripts")
FILES = sorted(p.name[:-4] for p in SCRIPTS.iterdir() if p.name.endswith(".lua"))
PIECES = [name for name in FILES if name.startswith("_")]


def source(name: str) -> str:
    return SCRIPTS.joinpath(f"{name}.lua").read_text()


def defined(piece: str) -> set[str]:
    text = source(piece)
    names = set(re.findall(r"^local function (\w+)", text, re.M))
    for group in re.findall(r"^local ([A-Z_][A-Z_0-9, ]*?)\s*=", text, re.M):
        names |= {name.strip() for name in group.split(",")}
    return names


def used_pieces(name: str) -> list[str]:
    code = re.sub(r"--[^\n]*", "", source(name))
    code = re.sub(r"'[^'\n]*'", "''", code)  # a name in a string ('push') is no use of it
    return [
        piece
        for piece in PIECES
        if piece != name and any(re.search(rf"\b{re.escape(n)}\b", code) for n in defined(piece))
    ]


def declared(name: str) -> list[str]:
    first = source(name).partition("\n")[0]
    return first[len(INCLUDE) :].split() if first.startswith(INCLUDE) else []


@pytest.mark.parametrize("name", FILES)
def test_each_script_includes_exactly_the_pieces_it_uses(name):
    assert sorted(declared(name)) == sorted(used_pieces(name))


@pytest.mark.parametrize("name", [name for name in FILES if not name.startswith("_")])
def test_a_loaded_script_has_each_piece_once_before_what_uses_it(name):
    text = script_source(name)
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
    assert source("_crawls") in script_source("overflow_take")


@pytest.mark.parametrize("name", [name for name in FILES if name != "_named"])
def test_every_script_takes_its_keys_and_arguments_by_name(name):
    code = re.sub(r"--[^\n]*", "", source(name))
    assert "KEYS[" not in code and "ARGV[" not in code
    if not name.startswith("_"):
        assert "_named" in declared(name)


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
