"""The web console, end to end: ``scrapy console`` against a real crawl state in a
real Redis, crawler nodes fetching the demo site, and a real Chromium driven by
Playwright. Screenshots of the main pages go to data/screenshots/.

Skipped, saying so, only on a machine with no browser (``make system-tools``
installs Debian's chromium)."""

from __future__ import annotations

import json
import re
from contextlib import contextmanager

import pytest

from extensions.render.browser import find_browser
from tests.conftest import ROOT, scrapy, site_hits
from tests.helpers import api, seed

needs_browser = pytest.mark.skipif(
    find_browser() is None, reason="no Chromium on this machine (make system-tools installs it)"
)
SCREENSHOTS = ROOT / "data" / "screenshots"
FAST = {"MAX_IDLE_TIME_BEFORE_CLOSE": 2, "NODE_TIMEOUT": 5, "USER_AGENT_ROTATION": False}


@pytest.fixture(scope="module")
def browser():
    if find_browser() is None:
        pytest.skip("no Chromium on this machine (make system-tools installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=find_browser(), headless=True)
        yield chromium
        chromium.close()


@contextmanager
def page_of(browser, **options):
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, **options)
    page = context.new_page()
    page.set_default_timeout(20_000)
    try:
        yield page
    finally:
        context.close()


def figure(page, field: str) -> str:
    return page.locator(f'#live [data-field="{field}"]').first.inner_text().strip()


@needs_browser
def test_the_pages_show_the_crawls_figures_live_and_status_matches_the_command(
    redis_url, redis_client, demo_site, nodes, start_console, browser
):
    # a part of the shop crawled; the rest stays queued
    seed(redis_url, "shop", demo_site.url + "/")
    nodes.start("shop", redis_url, NODE_ID="n1", CLOSESPIDER_PAGECOUNT=200, **FAST)
    assert nodes.wait(120) == [0], nodes.tail()
    # a second crawl under an id, seeded and waiting for a node
    assert scrapy("seed", "shop", "--crawl", "beta", demo_site.url + "/about",
                  "-s", f"REDIS_URL={redis_url}").returncode == 0  # fmt: skip
    console = start_console()
    done = int(redis_client.hget("shop:checkpoint", "done"))
    items = int(redis_client.hget("shop:checkpoint", "items"))
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    with page_of(browser) as page:
        page.goto(console.url + "/")
        shop = page.locator('section.spider[data-spider="shop"]')
        assert shop.locator('[data-field="done"]').inner_text() == str(done)
        assert shop.locator('[data-field="items"]').inner_text() == str(items)
        assert shop.locator('[data-field="start_urls"]').inner_text() == "1"
        assert shop.locator('tr[data-crawl="beta"]').count() == 1
        page.wait_for_selector(".chart .u-over")  # the chart drew (uPlot, served locally)
        page.screenshot(path=SCREENSHOTS / "console-overview.png", full_page=True)

        # live: a change in Redis shows without a reload
        redis_client.lpush("shop:start_urls", demo_site.url + "/category/books")
        page.wait_for_function(
            """() => document.querySelector('section.spider[data-spider="shop"] '
                 + '[data-field="start_urls"]').textContent.trim() === "2" """
        )

        page.goto(console.url + "/shop")
        assert figure(page, "done") == str(done)
        assert figure(page, "dlq") == "0"
        assert page.locator('tr[data-crawl="beta"] td').nth(1).inner_text() == "running"
        page.screenshot(path=SCREENSHOTS / "console-crawl.png", full_page=True)

        page.goto(console.url + "/nodes")
        row = page.locator('tr[data-node="n1"]')
        assert "closed" in row.inner_text() and re.search(r"\d+ MB", row.inner_text())
        page.screenshot(path=SCREENSHOTS / "console-nodes.png", full_page=True)

        redis_client.zadd("shop:hostrank", {"127.0.0.1": 5})  # as scrapy hostrank import
        page.goto(console.url + "/shop/hosts?host=127.0.0.1")
        ranked = page.locator("table.ranked tbody tr").first.locator("td")
        assert [ranked.nth(i).inner_text() for i in (0, 1)] == ["127.0.0.1", "5"]
        cells = page.locator("table.hosts tbody tr").first.locator("td")
        assert cells.nth(0).inner_text() == "127.0.0.1"
        # fetched: what the host's state counts as leased to nodes (those the node
        # handed back when it stopped early included)
        leased = int(redis_client.hget("shop:host:127.0.0.1", "leased"))
        assert int(cells.nth(6).inner_text()) == leased >= done
        queued = int(redis_client.hget("shop:frontier", "queued"))
        assert queued > 0 and int(cells.nth(4).inner_text()) == queued
        page.screenshot(path=SCREENSHOTS / "console-hosts.png", full_page=True)

    # /api/shop/status is what `scrapy status shop --json` prints
    status, from_api = api(console.url + "/api/shop/status")
    assert status == 200
    printed = json.loads(scrapy("status", "shop", "--json", "-s", f"REDIS_URL={redis_url}").stdout)
    assert from_api.keys() == printed.keys()
    moving = {"time", "nodes"}
    assert {k: v for k, v in from_api.items() if k not in moving} == {
        k: v for k, v in printed.items() if k not in moving
    }
    assert [n["pages"] for n in from_api["nodes"]] == [n["pages"] for n in printed["nodes"]]


@needs_browser
def test_a_dead_letter_replayed_from_the_browser_is_fetched_again_by_a_node(
    redis_url, redis_client, demo_site, nodes, start_console, browser
):
    failing = demo_site.url + "/flaky/500/7"  # answers 500, always
    seed(redis_url, "shop", failing)
    nodes.start("shop", redis_url, RETRY_TIMES=0, **FAST)
    assert nodes.wait(120) == [0], nodes.tail()
    assert site_hits(demo_site).get("/flaky/500/7") == 1
    assert redis_client.llen("shop:dlq") == 1
    console = start_console()

    with page_of(browser) as page:
        page.goto(console.url + "/shop/dlq")
        assert failing in page.locator("table.dlq").inner_text()
        page.screenshot(path=SCREENSHOTS / "console-dlq.png", full_page=True)
        page.locator('table.dlq input[name="id"]').first.check()
        page.get_by_role("button", name="Replay selected").click()
        page.wait_for_selector("#flash.ok")
        assert "replayed: 1" in page.locator("#flash").inner_text()
    assert redis_client.llen("shop:dlq") == 0
    assert int(redis_client.hget("shop:frontier", "queued")) == 1

    nodes.start("shop", redis_url, RETRY_TIMES=0, **FAST)
    assert nodes.wait(120) == [0, 0], nodes.tail()
    assert site_hits(demo_site).get("/flaky/500/7") == 2  # fetched again
    audit = [json.loads(r) for r in redis_client.lrange("shop:audit", 0, -1)]
    assert audit[0]["user"] == "local" and audit[0]["action"] == "dlq replay"


@needs_browser
def test_pause_from_the_browser_stops_leasing_and_resume_carries_on(
    redis_url, redis_client, demo_site, nodes, start_console, browser
):
    assert scrapy("seed", "shop", "--crawl", "alpha", demo_site.url + "/about",
                  "-s", f"REDIS_URL={redis_url}").returncode == 0  # fmt: skip
    console = start_console()
    with page_of(browser) as page:
        page.goto(console.url + "/shop")
        page.locator('tr[data-crawl="alpha"] button', has_text="Pause").click()
        page.wait_for_selector('tr[data-crawl="alpha"] button:has-text("Resume")')
    assert redis_client.hget("shop:crawls", "alpha") == b"paused"

    nodes.start("shop", redis_url, **FAST)  # reads the entry, leases nothing of alpha
    assert nodes.wait(120) == [0], nodes.tail()
    assert site_hits(demo_site).get("/about") is None

    with page_of(browser) as page:
        page.goto(console.url + "/shop")
        page.locator('tr[data-crawl="alpha"] button', has_text="Resume").click()
        page.wait_for_selector('tr[data-crawl="alpha"] button:has-text("Pause")')
    nodes.start("shop", redis_url, **FAST)
    assert nodes.wait(120) == [0, 0], nodes.tail()
    assert site_hits(demo_site).get("/about") == 1
    actions = [json.loads(r)["action"] for r in redis_client.lrange("shop:audit", 0, -1)]
    assert actions == ["resume", "pause"]


@needs_browser
def test_login_is_needed_with_a_password_and_a_wrong_one_is_refused(
    redis_url, start_console, browser
):
    console = start_console(CONSOLE_PASSWORD="right-horse", CONSOLE_USER="ops")
    with page_of(browser) as page:
        page.goto(console.url + "/shop")
        assert page.url.startswith(console.url + "/login")
        page.fill('input[name="username"]', "ops")
        page.fill('input[name="password"]', "wrong")
        page.click('button[type="submit"]')
        assert page.locator("#login-error").inner_text() == "wrong user name or password"
        page.fill('input[name="username"]', "ops")
        page.fill('input[name="password"]', "right-horse")
        page.click('button[type="submit"]')
        page.wait_for_url(console.url + "/shop")
        assert page.locator("#user").inner_text() == "ops"
        cookie = next(c for c in page.context.cookies() if c["name"] == "console_session")
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    log = console.log.read_text()  # type: ignore[attr-defined]
    assert "right-horse" not in log and "a failed login as 'ops'" in log

    # scripts: HTTP Basic with the same credentials
    assert api(console.url + "/api/overview")[0] == 401
    assert api(console.url + "/api/overview", auth=("ops", "wrong"))[0] == 401
    status, body = api(console.url + "/api/overview", auth=("ops", "right-horse"))
    assert status == 200 and "shop" in [s["name"] for s in body["spiders"]]


@needs_browser
def test_an_action_without_its_csrf_token_or_from_another_site_is_refused(
    redis_url, redis_client, start_console, browser
):
    redis_client.hset("shop:crawls", "alpha", "running")
    console = start_console()
    with page_of(browser) as page:
        page.goto(console.url + "/shop")
        call = """async (token) => {
            const headers = {"Content-Type": "application/json"};
            if (token) headers["X-CSRF-Token"] = token;
            const r = await fetch("/api/shop/crawls/alpha/pause",
                                  {method: "POST", headers, body: "{}"});
            return r.status;
        }"""
        assert page.evaluate(call, "") == 403
        assert page.evaluate(call, "forged") == 403
        assert redis_client.hget("shop:crawls", "alpha") == b"running"
        token = page.locator('meta[name="csrf-token"]').get_attribute("content")
        assert page.evaluate(call, token) == 200
    assert redis_client.hget("shop:crawls", "alpha") == b"paused"
    # a page elsewhere posting to the console: its Origin gives it away
    status, _ = api(console.url + "/api/shop/crawls/alpha/resume", data={},
                    headers={"Origin": "http://evil.test"})  # fmt: skip
    assert status == 403
    assert redis_client.hget("shop:crawls", "alpha") == b"paused"


@needs_browser
def test_a_hostile_dead_letter_shows_as_text(redis_url, redis_client, start_console, browser):
    url = 'http://x.test/"><script>window.pwned=1</script><img src=x onerror=window.pwned=2>'
    reason = "<script>window.pwned=3</script> 503 Service Unavailable"
    redis_client.lpush("shop:dlq", json.dumps({"kind": "retries_exhausted", "url": url,
                                               "error": reason, "node": "<b>n</b>",
                                               "time": 1.7e9}))  # fmt: skip
    redis_client.lpush("shop:dlq", b"\xff not json <script>window.pwned=4</script>")
    console = start_console()
    with page_of(browser) as page:
        dialogs: list[str] = []
        page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
        page.goto(console.url + "/shop/dlq?q=x.test")
        assert page.locator("td.url").first.inner_text() == url
        assert page.locator("td.reason").first.inner_text() == reason
        page.goto(console.url + "/shop/dlq")
        assert "window.pwned=4" in page.locator("tr.malformed").inner_text()
        page.goto(console.url + "/shop")
        assert reason in page.locator("ul.errors").inner_text()
        assert page.evaluate("window.pwned") is None and not dialogs


@needs_browser
def test_a_crawl_without_figures_yet_has_a_chart_that_says_so(redis_url, start_console, browser):
    seed(redis_url, "shop", "http://127.0.0.1:9/")  # seeded, no node has reported a minute
    console = start_console()
    with page_of(browser) as page:
        page.goto(console.url + "/shop")
        page.wait_for_selector(".chart.empty")
        assert "no data yet" in page.locator(".chart").first.inner_text()
        assert page.locator(".chart .u-over").count() == 0  # no empty frame drawn
