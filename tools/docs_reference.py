"""Write the reference pages of the documentation from the code, so they cannot
drift from it: docs/reference/{settings,keys,metrics,stats,commands}.md.

    python -m tools.docs_reference          # write them
    python -m tools.docs_reference --check  # exit 1 if one is not what the code says

``make docs`` writes them and builds the site; the tests check they are current.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import pkgutil
import re
import sys
from pathlib import Path

from extensions import capability, commands, defaults, keyspace

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "docs" / "reference"
SOURCE = ROOT / "extensions"
HEADER = "<!-- written by python -m tools.docs_reference from {source}: do not edit -->\n\n"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def settings_page() -> str:
    """Every setting of extensions/defaults.py under its section, with its
    default and the comment that explains it."""
    lines = (SOURCE / "defaults.py").read_text().splitlines()
    tree = ast.parse("\n".join(lines))
    out = [HEADER.format(source="extensions/defaults.py"), "# Settings\n\n",
           "Every setting the add-on installs, with its default (`extensions/defaults.py`). "
           "Set any of them as a Scrapy setting (`settings.py`, `-s NAME=VALUE`); "
           "`scrapy crawl` checks each one before it connects anywhere.\n"]  # fmt: skip
    section = None
    for node in tree.body:
        if not isinstance(node, (ast.Assign, ast.AnnAssign)):
            continue
        target = node.targets[0] if isinstance(node, ast.Assign) else node.target
        if not (isinstance(target, ast.Name) and target.id.isupper()):
            continue
        name = target.id
        above, start = [], node.lineno - 2
        while start >= 0 and lines[start].startswith("#"):
            above.insert(0, lines[start])
            start -= 1
        heading = next((line for line in above if line.startswith("# ---")), None)
        if heading:
            section = heading.strip("# -")
            out.append(f"\n## {section}\n\n| setting | default | meaning |\n|---|---|---|\n")
        elif section is None:
            section = "General"
            out.append(f"\n## {section}\n\n| setting | default | meaning |\n|---|---|---|\n")
        comments = [line.lstrip("# ") for line in above if not line.startswith("# ---")]
        inline = lines[node.end_lineno - 1].partition("  # ")[2]
        meaning = " ".join([*comments, inline]).strip()
        default = repr(getattr(defaults, name))
        out.append(f"| `{name}` | `{_cell(default)}` | {_cell(meaning)} |\n")
    for declared in capability.declared():  # each in its own package's declaration
        if declared.settings:
            out.append(f"\n## {declared.about}\n\n| setting | default | meaning |\n|---|---|---|\n")
        for name, setting in declared.settings.items():
            out.append(
                f"| `{name}` | `{_cell(repr(setting.default))}` | {_cell(setting.meaning)} |\n"
            )
    return "".join(out)


def _key_rows() -> list[tuple[str, str, str]]:
    """(key, type, meaning) from the table in extensions/keyspace.py's docstring."""
    rows: list[list[str]] = []
    lines = (keyspace.__doc__ or "").splitlines()
    rules = [i for i, line in enumerate(lines) if line.strip() and set(line) <= {"=", " "}]
    for line in lines[rules[1] + 1 : rules[2]]:  # between the header's rule and the last
        if not line.strip():
            continue
        if line.startswith("``"):
            key, rest = line[: line.index("``", 2) + 2], line[line.index("``", 2) + 2 :]
            kind, _, meaning = rest.strip().partition(" ")
            rows.append([key.strip("`"), kind, meaning.strip()])
        elif rows:
            rows[-1][2] += " " + line.strip()
    return [(k, t, m) for k, t, m in rows]


def keys_page() -> str:
    out = [HEADER.format(source="extensions/keyspace.py"), "# Redis keys\n\n",
           "Every key a crawl of spider `NAME` keeps in Redis (`extensions/keyspace.py`); "
           "with `REDIS_CLUSTER` the prefix is `{NAME}:`, with `FRONTIER_SHARDS` > 1 "
           "the per-shard keys live under `{NAME:K}:`.\n\n",
           "| key | type | holds | written by |\n|---|---|---|---|\n"]  # fmt: skip
    for key, kind, meaning in _key_rows():
        short = key.split(":")[1] if key.startswith("NAME:") else ""
        writers = keyspace.WRITTEN_BY.get(short, "")
        meaning = meaning.replace("``", "`")
        out.append(f"| `{key}` | {kind} | {_cell(meaning)} | {_cell(writers)} |\n")
    for name, declared in capability.keys().items():
        key = re.sub(r"%\((\w+)\)s", lambda m: m[1].upper(), declared.template)
        out.append(f"| `{key}` | {declared.type} | {_cell(declared.holds)} | "
                   f"{_cell(keyspace.WRITTEN_BY[name])} |\n")  # fmt: skip
    return "".join(out)


def _string_calls(path: Path) -> list[tuple[str, str, str]]:
    """(called name, first, second) of the calls with two string arguments in a
    module's source."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and len(node.args) >= 2:
            first, second = node.args[0], node.args[1]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                help_text = second.value if isinstance(second, ast.Constant) else ""
                called = ast.unparse(node.func).rpartition(".")[2]
                found.append((called, first.value, str(help_text)))
    return found


def metrics_page() -> str:
    from extensions.observability import metrics

    source = SOURCE / "observability" / "metrics.py"
    out = [HEADER.format(source="extensions/observability/metrics.py"), "# Metrics\n\n",
           "What a node serves to Prometheus on `METRICS_PORT` "
           "(`extensions/observability/metrics.py`).\n\n",
           "| metric | what |\n|---|---|\n"]  # fmt: skip
    seen = set()
    for called, name, help_text in _string_calls(source):
        if name.startswith("crawler_") and name not in seen and help_text:
            seen.add(name)
            # a counter is exposed with the suffix _total
            shown = f"{name}_total" if called in ("Counter", "CounterMetricFamily") else name
            out.append(f"| `{shown}` | {_cell(help_text)} |\n")
    for name, stat in metrics.STATS_COUNTERS.items():
        if name not in seen:
            out.append(f"| `{name}` | the node's `{stat}` stats counter |\n")
    return "".join(out)


# the calls that name a stat, and which of their arguments does: the collector's,
# and the item marker's (spidermiddlewares/marking.py)
_STAT_CALLS = {"inc_value": 0, "set_value": 0, "max_value": 0, "min_value": 0,
               "ItemMarker": 1, "mark": 3}  # fmt: skip


def _stat_names(node: ast.expr) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.IfExp):  # "a/b" if near else "a/c"
        return _stat_names(node.body) + _stat_names(node.orelse)
    if isinstance(node, ast.JoinedStr):  # f"traps/dropped/{reason}"
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
            else:
                parts.append("{" + ast.unparse(getattr(value, "value", value)) + "}")
        return ["".join(parts)]
    return []


def _called(node: ast.Call) -> str:
    if isinstance(node.func, ast.Attribute):
        return node.func.attr
    return node.func.id if isinstance(node.func, ast.Name) else ""


def stats_page() -> str:
    out = [HEADER.format(source="extensions/"), "# Stats\n\n",
           "The Scrapy stats the stack counts (in a node's closing stats dump and "
           "`crawler.stats`), by the module that counts them. `{...}` stands for a part "
           "of the name that varies.\n"]  # fmt: skip
    for path in sorted(SOURCE.rglob("*.py")):
        names = set()
        tree = ast.parse(path.read_text())
        assigned = {  # a stat's name kept in a variable first: counted = "a/b" if ...
            target.id: _stat_names(node.value)
            for node in ast.walk(tree) if isinstance(node, ast.Assign)
            for target in node.targets if isinstance(target, ast.Name)
        }  # fmt: skip
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or _called(node) not in _STAT_CALLS:
                continue
            at = _STAT_CALLS[_called(node)]
            if len(node.args) > at:
                argument = node.args[at]
                found = _stat_names(argument)
                if isinstance(argument, ast.Name):
                    found = assigned.get(argument.id, [])
                names.update(name for name in found if "/" in name)
        if names:
            out.append(f"\n## `{path.relative_to(ROOT)}`\n\n")
            out.extend(f"- `{name}`\n" for name in sorted(names))
    return "".join(out)


def commands_page() -> str:
    out = [HEADER.format(source="extensions/commands/"), "# Commands\n\n",
           "The `scrapy` commands the stack adds (`COMMANDS_MODULE = "
           '"extensions.commands"`).\n']  # fmt: skip
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"extensions.commands.{info.name}")
        command = getattr(module, "Command", None)
        if command is None:
            continue
        instance = command()
        out.append(f"\n## `scrapy {info.name} {instance.syntax()}`\n\n")
        out.append(f"{instance.short_desc()}.\n\n")
        long = instance.long_desc()
        if long and long != instance.short_desc():
            out.append(re.sub(r"\s+", " ", long).strip() + "\n")
    return "".join(out)


PAGES = {
    "settings.md": settings_page,
    "keys.md": keys_page,
    "metrics.md": metrics_page,
    "stats.md": stats_page,
    "commands.md": commands_page,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if stale")
    args = parser.parse_args(argv)
    stale = []
    REFERENCE.mkdir(parents=True, exist_ok=True)
    for name, make in PAGES.items():
        path = REFERENCE / name
        text = make()
        if path.exists() and path.read_text() == text:
            continue
        stale.append(name)
        if not args.check:
            path.write_text(text)
    if args.check and stale:
        print(f"stale: {', '.join(stale)} (run python -m tools.docs_reference)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
