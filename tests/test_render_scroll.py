"""The ``scroll`` page action on a real Chromium (Playwright, Debian's browser)
against the demo site's endless list: it reads the list to its end, and a list
whose next page is slow to answer is waited for, not taken as whole."""

from __future__ import annotations

import asyncio

import pytest

from extensions.render.actions import LOADING_WAITS, scroll
from extensions.render.browser import find_browser

pytestmark = pytest.mark.skipif(
    find_browser() is None, reason="no Chromium on this machine (make system-tools installs it)"
)
LINKS = "document.querySelectorAll('a.item').length"
JS_ITEMS = 30  # three pages of the list (the demo_site fixture reads it)


def scrolled(url: str, times: int, wait: int) -> int:
    """How many items the list shows once scrolled."""
    from playwright.async_api import async_playwright

    async def run() -> int:
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=find_browser())
            try:
                page = await browser.new_page()
                await page.goto(url)
                await page.wait_for_function(f"{LINKS} > 0", timeout=20_000)
                await scroll(page, times=times, wait=wait)
                return await page.evaluate(LINKS)
            finally:
                await browser.close()

    return asyncio.run(run())


@pytest.mark.spawns
def test_a_list_whose_next_page_is_slow_is_waited_for_and_the_end_is_found(demo_site):
    # each page answers 1.5 s late, past the 1 s a scroll waits to see the page
    # grow: the request still on its way keeps the wait going (the second is
    # long enough, on a loaded machine, for the page to have asked for more)
    slow = scrolled(demo_site.url + "/js/list?slow=1500", times=10, wait=1000)
    assert slow == JS_ITEMS
    # an answer later than every wait allowed: the list is taken as it stands
    late = (2 + LOADING_WAITS) * 200 + 1000
    cut = scrolled(demo_site.url + f"/js/list?slow={late}", times=10, wait=200)
    assert cut < JS_ITEMS
