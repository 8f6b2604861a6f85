"""Browser rendering, declared (``extensions/capability.py``): its settings with
their checks, its keys, the frontier's render lane part and its middleware;
what each does: the package's modules (``__init__.py``) and
``extensions/frontier/render/``."""

from __future__ import annotations

from extensions.capability import Capability, Key, Setting
from extensions.settingchecks import flag, names, number, regexes

CAPABILITY = Capability(
    name="render",
    about="browser rendering (extensions/render/)",
    settings={
        "RENDER_ENABLED": Setting(
            False, "this node renders (a render node) when it also finds a browser", flag
        ),
        "RENDER_BROWSER": Setting(
            "", "Chromium's path; empty = chromium, chromium-browser or google-chrome on PATH"
        ),
        "RENDER_URLS": Setting(
            [], "URL regexes always rendered (and a spider's render_urls)", regexes
        ),
        "RENDER_MAX_PAGES": Setting(
            4,
            "pages open at once on a render node (the render requests it leases)",
            number(int, 1, 256),
        ),
        "RENDER_PAGES_PER_BROWSER": Setting(
            100, "pages a browser renders before it is replaced by a fresh one", number(int, 1)
        ),
        "RENDER_MEMORY_LIMIT_MB": Setting(
            1024,
            "the browser's processes above this (RSS): replaced when idle",
            number(int, 64),
        ),
        "RENDER_PAGE_TIMEOUT": Setting(
            30.0,
            "seconds a page may take, actions included, before it fails",
            number(float, 0, above=True),
        ),
        "RENDER_BLOCK_RESOURCES": Setting(
            ["image", "font", "media"], "resource types the browser never fetches", names
        ),
        "RENDER_SCRIPTS": Setting({}, "name -> JavaScript that page actions may evaluate"),
        "RENDER_WAIT_FOR_NODES": Setting(
            True, "an idle plain node stays while render work waits for a render node", flag
        ),
        "RENDER_AUTO": Setting(
            False,
            "fetch plainly first, render what lacks content, learn it for the cluster",
            flag,
        ),
        "RENDER_AUTO_URLS": Setting(
            [], "URL regexes RENDER_AUTO decides for; empty = every URL", regexes
        ),
        "RENDER_AUTO_SELECTOR": Setting(
            "", "CSS selector a page's content must match (or a spider's needs_render)"
        ),
        "RENDER_AUTO_RECHECK": Setting(
            0.05,
            "share of pages learned as needing a browser fetched plainly again",
            number(float, 0, 1),
        ),
        "RENDER_AUTO_MAX_PATTERNS": Setting(
            100_000, "learned URL patterns kept in Redis at most", number(int, 0)
        ),
        "RENDER_AUTO_REFRESH": Setting(
            10.0,
            "seconds between a node's looks at the cluster's learned patterns",
            number(float, 0, above=True),
        ),
    },
    keys={
        "render_nodes": Key(
            "%(name)s:render_nodes",
            "zset",
            "render nodes (RENDER_ENABLED, a browser found) -> last heartbeat (ms since epoch)",
            "checkpoint.py (a render node's heartbeat; gone when it leaves)",
            crawl_state=True,
        ),
        "render_auto": Key(
            "%(name)s:render_auto",
            "hash",
            "RENDER_AUTO: URL patterns (host/dir/) learned as needing a browser -> when "
            "(ms since epoch); '#changes' counts what was learned (nodes follow it)",
            "render/autocheck.py (RENDER_AUTO learns and unlearns patterns)",
            crawl_state=True,
        ),
    },
    frontier_parts={"extensions.frontier.render.part.RenderPart": 200},
    downloader_middlewares={
        # after the ban check (a ban page is not a page that lacks its content):
        # RENDER_AUTO's check of a plain fetch, and render requests a plain node met
        "extensions.render.autocheck.RenderAutoMiddleware": 580,
    },
)
