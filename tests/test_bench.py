"""``make bench`` finds its sections, one module each, without running them."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT


@pytest.mark.spawns
def test_every_section_is_found_once_and_its_module_imports():
    listed = subprocess.run(
        [sys.executable, "-m", "tools.bench", "--list"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    numbers = [int(n) for n in re.findall(r"^\s*(\d+)\. ", listed.stdout, re.M)]
    modules = sorted((ROOT / "tools" / "bench" / "sections").glob("s[0-9][0-9]_*.py"))
    assert numbers == sorted(numbers) and len(numbers) == len(set(numbers)) == len(modules)
    assert numbers == [int(path.name[1:3]) for path in modules]  # each named by its number


@pytest.mark.spawns
def test_a_section_that_is_not_there_is_refused_with_those_that_are():
    chosen = subprocess.run(
        [sys.executable, "-m", "tools.bench"], cwd=ROOT, capture_output=True, text=True,
        timeout=120, env={"PATH": "", "BENCH_ONLY": "999"},
    )  # fmt: skip
    assert chosen.returncode != 0
    assert "BENCH_ONLY: no section '999'; there are 1, 2, 3" in chosen.stderr
