"""The browser a render node drives: Debian's Chromium (or any Chromium build),
found on the machine, never downloaded; and how much memory it holds."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
from pathlib import Path
from typing import Any

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")

# Headless, no sandbox when the node runs as root (containers), and none of the
# background traffic a desktop browser makes: a crawler's browser talks to the
# pages it renders and nothing else.
LAUNCH_ARGS = [
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--no-first-run",
    "--mute-audio",
    "--disable-quic",
    # a page that allocates without end loses its renderer, not the node
    "--js-flags=--max-old-space-size=512",
]


def find_browser(configured: str = "") -> str | None:
    """The browser executable: RENDER_BROWSER, else the first of CANDIDATES on
    PATH; None when there is none (the node then does not render)."""
    if configured:
        found = shutil.which(configured) or configured
        return found if os.path.isfile(found) and os.access(found, os.X_OK) else None
    for name in CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


def launch_options(executable: str) -> dict[str, Any]:
    args = list(LAUNCH_ARGS)
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        args.append("--no-sandbox")  # Chromium refuses to start its sandbox as root
    return {"executable_path": executable, "headless": True, "args": args}


def process_tree() -> dict[int, list[int]]:
    """Each process's children, read from /proc (pid -> child pids)."""
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # gone meanwhile
        parent = int(stat.rpartition(")")[2].split()[1])
        tree.setdefault(parent, []).append(int(entry.name))
    return tree


def tree_rss(root: int) -> int:
    """Bytes held by ``root`` and every process below it (``process_rss``;
    Linux /proc, 0 elsewhere): the Playwright driver and the browser's processes."""
    if not Path("/proc").is_dir():
        return 0
    tree = process_tree()
    total, todo, seen = 0, [root], set()
    while todo:
        pid = todo.pop()
        if pid not in seen:
            seen.add(pid)
            total += process_rss(pid)
            todo.extend(tree.get(pid, ()))
    return total


def process_rss(pid: int) -> int:
    """Bytes of memory process ``pid`` holds: its proportional share (PSS) of
    the pages it shares with others, so that a browser's processes, which share
    most of theirs, are not counted many times over; its RSS where the kernel
    gives no PSS."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def kill_browsers(root: int) -> int:
    """Kill every process two levels or more below ``root`` (the browsers under
    the Playwright driver, which stays); how many. For a browser that hangs
    even when told to close."""
    tree = process_tree()
    doomed = [pid for child in tree.get(root, ()) for pid in tree.get(child, ())]
    killed = 0
    while doomed:
        pid = doomed.pop()
        doomed.extend(tree.get(pid, ()))
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
            killed += 1
    return killed
