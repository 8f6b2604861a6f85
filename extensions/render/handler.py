"""The download handler of a render node: scrapy-playwright, bounded for days.

Only requests with ``meta["render"]`` go to the browser; the rest take Scrapy's
HTTP handler as on any node. Beyond scrapy-playwright:

* at most RENDER_MAX_PAGES pages open; each page and each proxy's context is
  closed when its request is done, whatever happened;
* a browser is replaced by a fresh one after RENDER_PAGES_PER_BROWSER pages, or
  once its processes hold more than RENDER_MEMORY_LIMIT_MB (it drains first:
  new pages wait until the old browser's are done), or after pages kept timing
  out (hung); a crashed one is started again by scrapy-playwright;
* a page has RENDER_PAGE_TIMEOUT seconds, actions included; past that it is
  closed and the request fails as a download error (retried with backoff, then
  dead-lettered with the reason);
* images, fonts and media are not fetched (RENDER_BLOCK_RESOURCES); a script's
  ``window.open`` gets null, as from a browser's popup blocker, and a window
  opened otherwise (a link to a new tab) is closed; downloads are refused;
* the request's proxy is the browser's too (a context per proxy), and its
  identity headers (the rotated user agent) go with every request the page makes;
* the ``playwright_*`` meta keys are the handler's own: a queue entry that
  brings them is not obeyed (they can name code to run).
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import time
from contextlib import suppress
from functools import partial
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from playwright.async_api import Error as PlaywrightError
from scrapy_playwright.handler import ScrapyPlaywrightDownloadHandler
from scrapy_playwright.headers import use_scrapy_headers

from extensions.botauth import BotSigner, signer_from_settings
from extensions.meta import RENDER, RENDER_ACTIONS
from extensions.render import browser as browsers
from extensions.render.actions import InvalidActions, check_actions, page_methods, spider_scripts

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)

DEFAULT_CONTEXT = "default"
MEMORY_CHECK_INTERVAL = 5.0  # seconds between looks at the browser's memory
HUNG_AFTER_TIMEOUTS = 3  # pages in a row that timed out: the browser is replaced
CLOSE_TIMEOUT = 10.0  # seconds a page, context or browser gets to close
CONTEXT_OPTIONS = {"accept_downloads": False, "service_workers": "block"}
# what a popup blocker does: a window a script opens would load and run a whole
# page beside the one rendered, five of them for a page that opens five
NO_POPUPS = "window.open = () => null;"


class RenderFailed(OSError):
    """A page that did not render (timed out, crashed, browser gone): a download
    error, retried as one (an OSError is in Scrapy's RETRY_EXCEPTIONS)."""


class RenderRefused(ValueError):
    """A render request the node will not run (its page actions): dead-lettered
    at once, with the reason."""


# Not sent by the browser: the proxy's credentials (the context's proxy carries
# them; a site never sees them), and the validators of a recrawl. A browser
# aborts a navigation answered 304 it did not ask for itself (it has no copy to
# show): a rendered page is fetched whole, and its change is told from the page.
NOT_SENT = frozenset({"proxy-authorization", "if-none-match", "if-modified-since"})


async def browser_headers(signer: BotSigner | None = None, **kwargs: Any) -> dict[str, str]:
    headers = await use_scrapy_headers(**kwargs)
    sent = {k: v for k, v in headers.items() if k.lower() not in NOT_SENT}
    if signer is not None:  # every request the page makes, its scripts' and styles' too
        signed = signer.headers(kwargs["playwright_request"].url)
        names = {name.lower() for name in signed}
        sent = {k: v for k, v in sent.items() if k.lower() not in names}
        sent.update(signed)
    return sent


def proxy_context(proxy: str, authorization: bytes | None = None) -> tuple[str, dict[str, Any]]:
    """(context name, Playwright's proxy option) for a Scrapy proxy URL and the
    ``Proxy-Authorization`` header Scrapy's proxy middleware made of its
    credentials. Loopback addresses go through the proxy too, as in Scrapy."""
    parts = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    server = f"{parts.scheme}://{parts.hostname}:{parts.port or 8080}"
    option: dict[str, Any] = {"server": server, "bypass": "<-loopback>"}
    if parts.username:
        option["username"] = unquote(parts.username)
        option["password"] = unquote(parts.password or "")
    elif authorization and authorization.startswith(b"Basic "):
        with suppress(ValueError):
            user, _, password = base64.b64decode(authorization[6:]).decode().partition(":")
            option["username"], option["password"] = user, password
    return f"proxy:{server}", option


class RenderDownloadHandler(ScrapyPlaywrightDownloadHandler):
    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        settings = crawler.settings
        self.crawler = crawler
        executable = browsers.find_browser(settings.get("RENDER_BROWSER", ""))
        if executable is None:  # the add-on installs the handler only when it found one
            raise RuntimeError("no browser found for RENDER_ENABLED (set RENDER_BROWSER)")
        options = browsers.launch_options(executable)
        options.update(settings.getdict("PLAYWRIGHT_LAUNCH_OPTIONS"))  # a project's own win
        self.config.launch_options = options
        self.max_pages = settings.getint("RENDER_MAX_PAGES")
        self.config.max_pages_per_context = self.max_pages
        self.config.max_contexts = None  # bounded by the pages: empty contexts close
        self.page_timeout = settings.getfloat("RENDER_PAGE_TIMEOUT")
        self.config.navigation_timeout_ms = self.page_timeout * 1000
        self.pages_per_browser = settings.getint("RENDER_PAGES_PER_BROWSER")
        self.memory_limit = settings.getint("RENDER_MEMORY_LIMIT_MB") * 1024 * 1024
        blocked = frozenset(settings.getlist("RENDER_BLOCK_RESOURCES"))
        self.abort_request = (lambda request: request.resource_type in blocked) if blocked else None
        if "PLAYWRIGHT_PROCESS_REQUEST_HEADERS" not in settings:
            self.process_request_headers = partial(
                browser_headers, signer=signer_from_settings(settings)
            )
        self._slots = asyncio.Semaphore(self.max_pages)
        self._turn = asyncio.Condition()
        self._active = 0  # pages being rendered on the current browser
        self._rendered = 0  # pages the current browser rendered
        self._timeouts = 0  # pages in a row that timed out
        self._retiring = False
        self._memory_checked = 0.0
        self._retire_reason = ""
        self._pages: dict[int, Any] = {}  # id(request) -> its page, while it renders
        self._closing = False

    # --- one page ---------------------------------------------------------------

    async def download_request(self, request: Request) -> Response:
        if request.meta.get(RENDER) is not True:
            return await super(ScrapyPlaywrightDownloadHandler, self).download_request(request)
        meta = request.meta
        for key in [key for key in meta if key.startswith("playwright")]:
            del meta[key]  # the handler's own: never taken from a queue entry
        spider = self.crawler.spider
        scripts = spider_scripts(spider)
        try:
            actions = check_actions(meta.get(RENDER_ACTIONS, []), scripts)
        except InvalidActions as exc:
            self.stats.inc_value("render/refused")
            raise RenderRefused(str(exc)) from None
        async with self._slots:
            await self._enter()
            try:
                return await self._render(request, actions, scripts)
            finally:
                for key in [key for key in meta if key.startswith("playwright")]:
                    del meta[key]  # PageMethods are not JSON: the request may be queued again
                await self._leave()

    async def _render(self, request: Request, actions: list, scripts: dict[str, str]) -> Response:
        meta = request.meta
        meta["playwright"] = True
        meta["playwright_page_methods"] = page_methods(actions, scripts)
        context, options = DEFAULT_CONTEXT, dict(CONTEXT_OPTIONS)
        if isinstance(meta.get("proxy"), str) and meta["proxy"]:
            authorization = request.headers.get("Proxy-Authorization")
            context, options["proxy"] = proxy_context(meta["proxy"], authorization)
        meta["playwright_context"] = context
        meta["playwright_context_kwargs"] = options
        started = time.monotonic()
        try:
            response = await asyncio.wait_for(self._download_request(request), self.page_timeout)
        except TimeoutError:
            self._timeouts += 1
            self.stats.inc_value("render/timeouts")
            if self._timeouts >= HUNG_AFTER_TIMEOUTS:
                self._retire_reason = self._retire_reason or "hung"
            raise RenderFailed(
                f"the page did not settle within RENDER_PAGE_TIMEOUT ({self.page_timeout:g} s)"
            ) from None
        except PlaywrightError as exc:
            self.stats.inc_value("render/failed")
            raise RenderFailed(f"the browser failed the page: {str(exc).splitlines()[0]}") from None
        finally:
            await self._close_page(request, context)
        self._timeouts = 0
        self.stats.inc_value("render/pages")
        self.stats.inc_value("render/seconds", round(time.monotonic() - started, 3))
        return response

    async def _create_browser_context(self, name: str, context_kwargs: dict | None,
                                      spider: Any = None) -> Any:  # fmt: skip
        wrapper = await super()._create_browser_context(name, context_kwargs, spider)
        await wrapper.context.add_init_script(NO_POPUPS)
        return wrapper

    async def _create_page(self, request: Request, spider: Any) -> Any:
        page = await super()._create_page(request, spider)
        self._pages[id(request)] = page
        # counted here and on the page's own close event: scrapy-playwright's
        # page_count/closed misses a page whose close a timeout cut short
        self.stats.inc_value("render/pages_opened")
        page.on("close", lambda _page: self.stats.inc_value("render/pages_closed"))
        page.on("popup", self._close_popup)
        page.on("crash", lambda _page: self.stats.inc_value("render/crashed"))
        return page

    async def _close_popup(self, popup: Any) -> None:
        self.stats.inc_value("render/popups_closed")
        with suppress(PlaywrightError):
            await popup.close()

    async def _close_page(self, request: Request, context: str) -> None:
        page = self._pages.pop(id(request), None)
        if page is not None and not page.is_closed():
            # timed out or cancelled: scrapy-playwright closes the pages it finishes
            try:
                await asyncio.wait_for(page.close(run_before_unload=False), CLOSE_TIMEOUT)
                self.stats.inc_value("playwright/page_count/closed")
            except (PlaywrightError, TimeoutError):
                self._retire_reason = "hung"  # a page that cannot be closed: a new browser
        wrapper = self.context_wrappers.get(context)
        if context != DEFAULT_CONTEXT and wrapper is not None and not wrapper.context.pages:
            with suppress(PlaywrightError, TimeoutError):
                await asyncio.wait_for(wrapper.context.close(), CLOSE_TIMEOUT)

    # --- the browser's life -------------------------------------------------------

    async def _enter(self) -> None:
        async with self._turn:
            await self._turn.wait_for(lambda: not self._retiring)
            reason = self._due()
            if reason:
                self._retiring = True
                await self._turn.wait_for(lambda: self._active == 0)
                await self._retire(reason)
                self._retiring = False
                self._turn.notify_all()
            self._active += 1

    async def _leave(self) -> None:
        async with self._turn:
            self._active -= 1
            self._rendered += 1
            self._turn.notify_all()

    def _due(self) -> str:
        """Why the browser is replaced before the next page, or ''."""
        if not hasattr(self, "browser"):
            return ""
        if self._retire_reason:
            return self._retire_reason
        if self._rendered >= self.pages_per_browser:
            return "pages"
        now = time.monotonic()
        if now - self._memory_checked >= MEMORY_CHECK_INTERVAL:
            self._memory_checked = now
            held = self.browser_memory()
            self.stats.max_value("render/memory_peak", held)
            if held > self.memory_limit:
                return "memory"
        return ""

    def browser_memory(self) -> int:
        """Bytes held by the Playwright driver and the browser: the processes below
        this node's."""
        own = browsers.tree_rss(os.getpid()) - browsers.process_rss(os.getpid())
        return max(own, 0)

    async def _retire(self, reason: str) -> None:
        old = getattr(self, "browser", None)
        held = self.browser_memory()
        logger.info(
            "replacing the browser (%s) after %d pages; it held %d MB",
            reason,
            self._rendered,
            held // 2**20,
        )
        self.stats.inc_value(f"render/browser_replaced/{reason}")
        if hasattr(self, "browser"):
            del self.browser  # the next page launches a fresh one
        wrappers = list(self.context_wrappers.values())
        self.context_wrappers.clear()
        self._rendered, self._timeouts, self._retire_reason = 0, 0, ""
        for wrapper in wrappers:
            with suppress(PlaywrightError, TimeoutError):
                await asyncio.wait_for(wrapper.context.close(), CLOSE_TIMEOUT)
        if old is not None:
            try:
                await asyncio.wait_for(old.close(), CLOSE_TIMEOUT)
            except (PlaywrightError, TimeoutError):
                browsers.kill_browsers(os.getpid())  # hung for good: its processes go

    async def _browser_disconnected_callback(self, browser: Any = None) -> None:
        # a browser retired on purpose is gone already; only the current one's
        # loss (a crash) is the handler's business
        if browser is not None and browser is not getattr(self, "browser", None):
            return
        if not self._closing:
            self.stats.inc_value("render/browser_lost")
            logger.warning("the browser disconnected; the next page starts a new one")
        await super()._browser_disconnected_callback()

    async def _close(self) -> None:
        self._closing = True
        await super()._close()
