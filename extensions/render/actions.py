"""Page actions: what a browser does on a page before its HTML is taken.

They travel in ``meta["render_actions"]`` through Redis as plain JSON, a list of
``{"method": NAME, "args": [...], "kwargs": {...}}``, so they are checked as any
queue entry: only the methods named here, JSON arguments, bounded. ``evaluate``
and ``wait_for_function`` run script, which a queue entry must never bring: they
name a script the spider itself lists (``render_scripts`` / RENDER_SCRIPTS).
``scroll`` is the stack's own: scroll to the bottom ``times`` times, ``wait`` ms
apart (an endless list loads more each time).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from extensions.meta import RENDER_ACTIONS

MAX_ACTIONS = 20
MAX_TEXT = 2000  # characters of one argument (a selector, text to type)
MAX_SCROLLS = 50
MAX_WAIT_MS = 60_000
LOADING_WAITS = 4  # scroll: more waits for a page whose requests are still answering

#: Playwright page methods a queue entry may name, and how many positional
#: arguments each takes at most
PAGE_METHODS = {
    "wait_for_selector": 1,
    "wait_for_load_state": 1,
    "wait_for_timeout": 1,
    "wait_for_url": 1,
    "click": 1,
    "dblclick": 1,
    "hover": 1,
    "focus": 1,
    "fill": 2,
    "type": 2,
    "press": 2,
    "check": 1,
    "select_option": 2,
}
#: methods that run a script: their first argument names one of the spider's scripts
SCRIPT_METHODS = {"evaluate": 1, "wait_for_function": 1}
SCROLL = "scroll"
_KWARGS = frozenset(
    {"timeout", "state", "delay", "button", "click_count", "force", "strict", "position",
     "modifiers", "no_wait_after", "trial", "polling", "times", "wait"}
)  # fmt: skip


class InvalidActions(ValueError):
    """Page actions a node refuses (the request is dead-lettered with this reason)."""


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _script_name(args: list[Any], scripts: Mapping[str, str] | None) -> bool:
    if not args or not isinstance(args[0], str) or not args[0].isidentifier():
        return False
    return scripts is None or args[0] in scripts


def _plain(value: Any, depth: int = 0) -> bool:
    """A small JSON value: no objects of other types, bounded nesting and text."""
    if depth > 3:
        return False
    if value is None or isinstance(value, (bool, int, float)):
        return True
    if isinstance(value, str):
        return len(value) <= MAX_TEXT
    if isinstance(value, list):
        return len(value) <= 20 and all(_plain(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return len(value) <= 20 and all(
            isinstance(k, str) and _plain(v, depth + 1) for k, v in value.items()
        )
    return False


def check_actions(actions: Any, scripts: Mapping[str, str] | None) -> list[dict[str, Any]]:
    """The actions, each ``{"method", "args", "kwargs"}``; raises InvalidActions."""
    if not isinstance(actions, list):
        raise InvalidActions(f"render_actions must be a list, not {type(actions).__name__}")
    if len(actions) > MAX_ACTIONS:
        raise InvalidActions(f"render_actions holds {len(actions)} actions (at most {MAX_ACTIONS})")
    checked = []
    for number, action in enumerate(actions, 1):
        if not isinstance(action, dict) or not isinstance(action.get("method"), str):
            raise InvalidActions(f"render action {number} is not {{'method': NAME, ...}}")
        method = action["method"]
        args, kwargs = action.get("args", []), action.get("kwargs", {})
        if set(action) - {"method", "args", "kwargs"}:
            raise InvalidActions(f"render action {number} ({method}) has unknown keys")
        if not isinstance(args, list) or not isinstance(kwargs, dict):
            raise InvalidActions(
                f"render action {number} ({method}): args a list, kwargs an object"
            )
        if not _plain(args) or not _plain(kwargs):
            raise InvalidActions(
                f"render action {number} ({method}): arguments too large or not JSON"
            )
        unknown = set(kwargs) - _KWARGS
        if unknown:
            raise InvalidActions(
                f"render action {number} ({method}): unknown kwargs {sorted(unknown)}"
            )
        limit = PAGE_METHODS.get(method, SCRIPT_METHODS.get(method, 0 if method == SCROLL else -1))
        if limit < 0:
            raise InvalidActions(
                f"render action {number}: {method!r} is not a page action a queue entry may name"
            )
        if len(args) > limit:
            raise InvalidActions(
                f"render action {number} ({method}) takes at most {limit} arguments"
            )
        if method in SCRIPT_METHODS and not _script_name(args, scripts):
            raise InvalidActions(
                f"render action {number} ({method}) must name one of the spider's "
                f"render_scripts ({sorted(scripts or ()) or 'none'}): a queue entry runs no script"
            )
        if method != SCROLL and {"times", "wait"} & set(kwargs):
            raise InvalidActions(f"render action {number} ({method}): times and wait are scroll's")
        waits = [kwargs.get("timeout"), kwargs.get("wait")]
        if method == "wait_for_timeout":
            waits += args
        for wait in waits:
            if wait is not None and not (_number(wait) and 0 <= wait <= MAX_WAIT_MS):
                raise InvalidActions(f"render action {number} ({method}): a wait of {wait!r} ms")
        times = kwargs.get("times", 1)
        if not _integer(times) or not 0 < times <= MAX_SCROLLS:
            raise InvalidActions(
                f"render action {number} ({method}): times must be 1 to {MAX_SCROLLS}"
            )
        checked.append({"method": method, "args": list(args), "kwargs": dict(kwargs)})
    return checked


def render_meta_problem(
    meta: dict[str, Any], scripts: Mapping[str, str] | None = None
) -> str | None:
    """Why a request's page actions cannot run, or None. Without ``scripts``
    (no spider at hand) a script is only checked to be a name; the node that
    renders checks the name against its spider's scripts."""
    if RENDER_ACTIONS not in meta:
        return None
    try:
        check_actions(meta[RENDER_ACTIONS], scripts)
    except InvalidActions as exc:
        return str(exc)
    return None


def spider_scripts(spider: Any) -> dict[str, str]:
    """The scripts page actions may name: RENDER_SCRIPTS, then the spider's own
    ``render_scripts`` ({name: JavaScript})."""
    scripts = dict(spider.settings.getdict("RENDER_SCRIPTS")) if hasattr(spider, "settings") else {}
    own = getattr(spider, "render_scripts", None)
    if isinstance(own, Mapping):
        scripts.update(own)
    return {str(name): str(script) for name, script in scripts.items()}


async def scroll(page: Any, times: int = 1, wait: int = 1000) -> None:
    """Scroll to the bottom up to ``times`` times, each time waiting up to ``wait``
    ms for the page to grow (an endless list loading more); stops when it did not
    and nothing the page asked for was loading. An answer still on its way, or
    one that came in during the wait (the page has yet to show it), is waited
    for: up to LOADING_WAITS more ``wait``s before the list is taken as whole (a
    slow server, a busy machine; RENDER_PAGE_TIMEOUT bounds it all)."""
    loading = _Loading()
    handlers = {"request": loading.started, "requestfinished": loading.ended,
                "requestfailed": loading.ended}  # fmt: skip
    for event, handler in handlers.items():
        page.on(event, handler)
    try:
        for _ in range(times):
            height = await page.evaluate("document.scrollingElement.scrollHeight")
            await page.evaluate("window.scrollTo(0, document.scrollingElement.scrollHeight)")
            if not await _grew(page, height, wait, loading):
                return
    finally:
        for event, handler in handlers.items():
            page.remove_listener(event, handler)


class _Loading:
    """The page's requests not answered yet, and how many were answered."""

    def __init__(self) -> None:
        self.pending: set[Any] = set()
        self.answered = 0

    def started(self, request: Any) -> None:
        self.pending.add(request)

    def ended(self, request: Any) -> None:
        self.pending.discard(request)
        self.answered += 1


async def _grew(page: Any, height: int, wait: int, loading: _Loading) -> bool:
    for _ in range(1 + LOADING_WAITS):
        answered = loading.answered
        try:
            await page.wait_for_function(
                "height => document.scrollingElement.scrollHeight > height",
                arg=height,
                timeout=wait,
            )
            return True
        except Exception as exc:  # Playwright's TimeoutError: not grown yet
            if "Timeout" not in type(exc).__name__:
                raise
        if not loading.pending and loading.answered == answered:
            return False
    return False


def page_methods(actions: list[dict[str, Any]], scripts: Mapping[str, str]) -> list[Any]:
    """scrapy-playwright PageMethods for checked actions (a script name becomes
    the spider's script)."""
    from scrapy_playwright.page import PageMethod

    methods = []
    for action in actions:
        method, args, kwargs = action["method"], list(action["args"]), dict(action["kwargs"])
        if method == SCROLL:
            methods.append(PageMethod(scroll, **kwargs))
            continue
        if method in SCRIPT_METHODS:
            args[0] = scripts[args[0]]
        methods.append(PageMethod(method, *args, **kwargs))
    return methods
