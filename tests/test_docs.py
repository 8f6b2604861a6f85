"""The documentation site: its reference pages say what the code says, and it
builds strictly (a broken link fails it)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest
from mkdocs.commands.build import build
from mkdocs.config import load_config
from mkdocs.exceptions import Abort

from extensions import defaults
from extensions.keyspace import WRITTEN_BY
from tests.conftest import ROOT


@pytest.mark.spawns
def test_the_reference_pages_are_what_the_code_says():
    check = [sys.executable, "-m", "tools.docs_reference", "--check"]
    done = subprocess.run(check, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"run python -m tools.docs_reference\n{done.stdout}{done.stderr}"


def test_the_settings_reference_lists_every_setting():
    page = (ROOT / "docs" / "reference" / "settings.md").read_text()
    listed = set(re.findall(r"^\| `([A-Z][A-Z0-9_]+)` \|", page, flags=re.M))
    assert listed == {name for name in dir(defaults) if name.isupper()}


def test_the_files_named_as_writers_of_the_keys_exist():
    named = {
        word
        for writers in WRITTEN_BY.values()
        for word in re.findall(r"[\w*]+\.(?:lua|py)", writers)
    }
    files = {path.name for path in (ROOT / "extensions").rglob("*") if path.is_file()}
    for name in named:
        pattern = re.compile(name.replace(".", r"\.").replace("*", ".*") + "$")
        assert any(pattern.match(file) for file in files), name


def _build(docs_dir, site_dir) -> None:
    config = load_config(str(ROOT / "mkdocs.yml"), docs_dir=str(docs_dir), site_dir=str(site_dir))
    build(config)


def test_the_site_builds_strictly_and_a_broken_link_fails_it(tmp_path):
    docs = tmp_path / "docs"
    shutil.copytree(ROOT / "docs", docs)
    _build(docs, tmp_path / "site")
    assert (tmp_path / "site" / "reference" / "settings" / "index.html").exists()
    page = docs / "items.md"
    page.write_text(page.read_text() + "\nSee [nowhere](no-such-page.md).\n")
    with pytest.raises(Abort):
        _build(docs, tmp_path / "site2")


def test_the_readme_opens_with_the_two_commands_and_stays_short():
    readme = (ROOT / "README.md").read_text()
    first_block = readme.split("```sh", 1)[1].split("```", 1)[0]
    assert first_block.split()[:2] == ["make", "demo"] and "make test" in first_block
    assert len(readme.splitlines()) <= 200
    for link in re.findall(r"\]\((docs/[^)#]+)", readme):
        assert (ROOT / link).exists(), link


def test_the_architecture_page_names_every_module_and_package():
    """Its layout section (docs/architecture.md) is the map: a module or package
    missing from it is one a reader cannot find."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    layout = page[page.index("extensions/           ") : page.index("\ndeploy/")]
    package = ROOT / "extensions"
    missing = [
        str(path.relative_to(ROOT))
        for path in sorted(package.rglob("*.py"))
        if path.name != "__init__.py"
        and "__pycache__" not in path.parts
        and not re.search(rf"\b{re.escape(path.stem)}\b", layout)
    ]
    missing += [
        str(path.relative_to(ROOT))
        for path in sorted(package.iterdir())
        if path.is_dir() and path.name != "__pycache__" and f"{path.name}/" not in layout
    ]
    assert missing == []


def test_no_module_is_over_400_lines():
    """A module past 400 lines holds more than one concern: split it."""
    sources = [
        path
        for folder in ("extensions", "tools", "servers", "tests", "demosite", "crawler", "deploy")
        for pattern in ("*.py", "*.lua")
        for path in (ROOT / folder).rglob(pattern)
    ]
    long = {
        str(path.relative_to(ROOT)): lines
        for path in sources
        if (lines := len(path.read_text().splitlines())) > 400
    }
    assert long == {}
