"""``make bench``: side-by-side figures measured in one run on this machine.

Every section is a module of ``tools/bench/sections/``, found there and known by
its number (``all_sections()``); ``BENCH_ONLY=1,3`` picks sections and
``python -m tools.bench --list`` names them.
Crawl sections run the bundled demo shop on loopback with the same spider logic and
concurrency (``tools/bench_crawl.py``); their variants are run alternately and each
figure is the median of ``BENCH_RUNS`` runs (default 3). A section whose figures are
not noisy, or that takes minutes, is measured in the first run only.
"""

from __future__ import annotations

import functools
import importlib
import os
import pkgutil
import sys
import tempfile
from pathlib import Path

from servers import services
from tools.bench import sections as section_modules
from tools.bench.base import Bench, Section
from tools.bench_crawl import RUNS
from tools.bench_measures import compile_project


@functools.cache
def all_sections() -> dict[int, type[Section]]:
    """Every section of ``tools/bench/sections/``, by its number (each module
    defines one; two with one number are refused)."""
    found: dict[int, type[Section]] = {}
    for module_info in pkgutil.iter_modules(section_modules.__path__):
        module = importlib.import_module(f"{section_modules.__name__}.{module_info.name}")
        defined = [
            value for value in vars(module).values()
            if isinstance(value, type) and issubclass(value, Section)
            and value.__module__ == module.__name__
        ]  # fmt: skip
        if len(defined) != 1:
            raise RuntimeError(f"{module.__name__} defines {len(defined)} sections, not one")
        number = defined[0].number
        if number in found:
            raise RuntimeError(f"bench section {number} is in two modules")
        found[number] = defined[0]
    return dict(sorted(found.items()))


def chosen_sections(only: str | None) -> list[Section]:
    """The sections ``BENCH_ONLY`` names (all when unset), in number order."""
    if not only:
        return [cls() for _, cls in sorted(all_sections().items())]
    numbers = []
    for part in only.split(","):
        if not part.strip().isdigit() or int(part) not in all_sections():
            known = ", ".join(map(str, all_sections()))
            raise SystemExit(f"BENCH_ONLY: no section {part.strip()!r}; there are {known}")
        numbers.append(int(part))
    return [all_sections()[number]() for number in sorted(set(numbers))]


def main(argv: list[str]) -> None:
    if "--list" in argv:
        for number, cls in sorted(all_sections().items()):
            print(f"{number:3d}. {cls.title}")
        return
    sections = chosen_sections(os.environ.get("BENCH_ONLY"))
    compile_project()
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        work = Path(tmp)
        server = services.start_redis(work / "redis")
        proxy = services.start_forward_proxy()
        uri = os.environ.get("TEST_MONGO_URI")
        mongo = None
        if not uri and any(s.needs_mongo for s in sections):
            mongo = services.start_mongo_wire(work / "mongo")
            uri = mongo.url
        bench = Bench(work, server.url, proxy.url, uri)
        try:
            for run in range(RUNS):
                for chosen in sections:
                    if run == 0 or not chosen.once:
                        chosen.measure(bench, run)
                print(f"run {run + 1}/{RUNS} done", file=sys.stderr)
        finally:
            for chosen in sections:
                chosen.close()
            server.stop()
            proxy.stop()
            if mongo is not None:
                mongo.stop()
    for chosen in sections:
        chosen.report(bench)


if __name__ == "__main__":
    main(sys.argv[1:])
