"""JavaScript pages across the cluster, end to end: real nodes, real Redis, the
demo site's /js/ pages and a real Chromium driven by Playwright.

Skipped, saying so, only on a machine with no browser (``make system-tools``
installs Debian's chromium)."""

import json
import os
import re
import signal
import time
import urllib.request
from contextlib import suppress
from pathlib import Path

import pytest

from demosite import jspages
from extensions.keys import SpiderKeys
from extensions.observability.status import crawl_status
from extensions.render.browser import find_browser, process_tree
from servers import services
from tests.conftest import read_items, scrapy, site_hits
from tests.helpers import SECRET, proxied, wait_for, with_credentials
from tests.test_warc import reparsed_from_warc

needs_browser = pytest.mark.skipif(
    find_browser() is None, reason="no Chromium on this machine (make system-tools installs it)"
)

SETTINGS = {
    "MAX_IDLE_TIME_BEFORE_CLOSE": 5,
    "NODE_TIMEOUT": 5,
    "LOGSTATS_INTERVAL": 1,
    "USER_AGENT_ROTATION": False,
}
RENDER = {"RENDER_ENABLED": True}
#: the JavaScript shop's items here (the demo_site fixture reads it): two pages
#: of its endless list, and a browser's work that two cores share with seven more tests
JS_ITEMS = 20
JS_PAGES = {"/js/", "/js/list", "/js/data"} | {f"/js/item/{n}" for n in range(1, JS_ITEMS + 1)}


def descendants(pid: int) -> list[int]:
    """The processes below ``pid`` (Playwright starts the browser in a process
    group of its own: the tree, not the group, tells a node's browser)."""
    tree = process_tree()
    found, todo = [], list(tree.get(pid, ()))
    while todo:
        child = todo.pop()
        found.append(child)
        todo.extend(tree.get(child, ()))
    return found


def kill_with_browser(proc) -> None:
    """A node and everything below it, as when its machine is lost."""
    below = descendants(proc.pid)
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    for pid in below:
        with suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture
def render_nodes(nodes):
    """The nodes fixture, whose teardown also kills what a node left behind."""
    yield nodes
    for proc in nodes.procs:
        kill_with_browser(proc)


def agents(site) -> dict[str, list[str]]:
    with urllib.request.urlopen(site.url + "/__agents", timeout=10) as response:
        return json.load(response)


def seed(redis_url: str, *args: str) -> None:
    result = scrapy("seed", "jsshop", *args, "-s", f"REDIS_URL={redis_url}")
    assert result.returncode == 0, result.stdout + result.stderr


def js_paths(items) -> set[str]:
    return {re.sub(r"^http://[^/]+", "", item["url"]) for item in items}


def alive(pids: list[int]) -> list[int]:
    """Those of ``pids`` still running, zombies aside (a node that exited leaves
    no tree to read: its browser's pids are taken while it runs)."""
    running = []
    for pid in pids:
        with suppress(OSError):
            if Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z":
                running.append(pid)
    return running


def browsers_below(proc) -> list[int]:
    """The browser processes below a node."""
    found = []
    for pid in descendants(proc.pid):
        with suppress(OSError):
            if "chrom" in Path(f"/proc/{pid}/comm").read_text():
                found.append(pid)
    return found


@needs_browser
def test_a_plain_node_and_a_render_node_crawl_javascript_pages(
    redis_url, redis_client, demo_site, render_nodes, tmp_path
):
    nodes = render_nodes
    seed(redis_url, demo_site.url + "/js/")
    warc = {"WARC_ENABLED": True, "WARC_DIR": str(tmp_path / "warc")}  # a rendered page's DOM
    plain = nodes.start("jsshop", redis_url, NODE_ID="plain", USER_AGENT="plain-node", **SETTINGS,
                        **warc)  # fmt: skip
    # alone, the plain node leases none of the render work, and waits for a render node
    wait_for(lambda: "wait for a render node" in nodes.log(0), 60, "the plain node waits")
    status = crawl_status(redis_client, SpiderKeys.for_spider("jsshop"))
    assert (status["render_queued"], status["render_nodes"]) == (1, 0)
    assert (
        "render: 1 queued for a browser, 0 render nodes alive"
        in scrapy("status", "jsshop", "-s", f"REDIS_URL={redis_url}").stdout
    )
    time.sleep(SETTINGS["MAX_IDLE_TIME_BEFORE_CLOSE"] + 2)
    assert plain.poll() is None  # past MAX_IDLE_TIME_BEFORE_CLOSE, still there

    render = nodes.start("jsshop", redis_url, NODE_ID="render", USER_AGENT="render-node",
                         **RENDER, **SETTINGS, **warc)  # fmt: skip
    wait_for(
        lambda: crawl_status(redis_client, SpiderKeys.for_spider("jsshop"))["render_nodes"] == 1,
        60,
        "the render node registered",
    )
    wait_for(lambda: browsers_below(render), 60, "the render node's browser")
    browser = browsers_below(render)
    assert nodes.wait(180) == [0, 0], nodes.tail()

    items = read_items(tmp_path / "items")
    assert js_paths(items) == JS_PAGES and len(items) == len(JS_PAGES)
    by_path = {re.sub(r"^http://[^/]+", "", item["url"]): item for item in items}
    assert all(item["rendered"] and item["title"] for item in items)  # the browser's DOM
    assert by_path["/js/item/7"]["price"] == jspages.price(7)
    assert by_path["/js/list"]["links"] == JS_ITEMS  # scrolled to its end
    assert by_path["/js/data"]["rows"] == 5  # loaded by fetch
    # only the render node fetched the render work, the browser's own requests too
    seen = agents(demo_site)
    assert {path for path, uas in seen.items() if "plain-node" in uas} <= {"/robots.txt"}
    assert all(seen[path] == ["render-node"] for path in JS_PAGES)
    assert seen["/js/api/data.json"] == ["render-node"]
    assert nodes.stat(0, "render/pages") == 0
    assert nodes.stat(1, "render/pages") == len(JS_PAGES)
    assert nodes.stat(1, "render/pages_opened") == nodes.stat(1, "render/pages_closed") > 0
    assert nodes.stat(1, "playwright/page_count/max_concurrent") <= 4  # RENDER_MAX_PAGES
    wait_for(lambda: alive(browser) == [], 15, "the node's browser gone")

    # each rendered page is archived as the DOM its callback saw, and reparsed from it
    # into the same items, with no request to the site
    doms = reparsed_from_warc("jsshop", tmp_path, redis_url, items, lambda: agents(demo_site))
    assert set(doms) == JS_PAGES
    assert f"{jspages.price(7)}".encode() in doms["/js/item/7"]  # written by the page's script


@needs_browser
@pytest.mark.chaos
def test_kill_9_of_the_render_node_loses_no_page(
    redis_url, redis_client, demo_site, render_nodes, tmp_path
):
    nodes = render_nodes
    seed(redis_url, demo_site.url + "/js/")
    # on the project's NODE_TIMEOUT: the victim's leases come back 15 s after it died
    defaults = {name: value for name, value in SETTINGS.items() if name != "NODE_TIMEOUT"}
    render = {**defaults, **RENDER}
    nodes.start("jsshop", redis_url, NODE_ID="plain", **defaults)
    victim = nodes.start("jsshop", redis_url, NODE_ID="r1", **render)
    items_dir = tmp_path / "items"
    wait_for(lambda: len(read_items(items_dir)) >= 10, 120, "the render node under way")
    assert browsers_below(victim)
    kill_with_browser(victim)  # the node and its browser, as a lost machine
    victim.wait(30)
    nodes.start("jsshop", redis_url, NODE_ID="r2", **render)
    codes = nodes.wait(240)
    assert codes == [0, -signal.SIGKILL, 0], nodes.tail()
    assert js_paths(read_items(items_dir)) == JS_PAGES
    assert nodes.stat(2, "render/pages") > 0


@needs_browser
def test_auto_mode_learns_the_javascript_pages_for_the_cluster(
    redis_url, redis_client, demo_site, render_nodes, tmp_path
):
    nodes = render_nodes
    # what one node learns, the other knows within a second (the change count),
    # well inside the seconds the endless list takes to render and scroll
    auto = {**SETTINGS, "RENDER_AUTO_RECHECK": 0}
    seed(redis_url, "--crawl", "first", demo_site.url + "/js/", demo_site.url + "/about")
    nodes.start("jsshop", redis_url, {"render": "auto"}, NODE_ID="p1", USER_AGENT="plain-1", **auto)
    nodes.start("jsshop", redis_url, {"render": "auto"}, NODE_ID="r1", USER_AGENT="render-1",
                **RENDER, **auto)  # fmt: skip
    assert nodes.wait(180) == [0, 0], nodes.tail()

    items = read_items(tmp_path / "items")
    assert js_paths(items) == JS_PAGES | {"/about"}
    assert all(item["title"] for item in items)  # every JS page stored as rendered
    learned = {key.decode() for key in redis_client.hkeys("jsshop:render_auto")} - {"#changes"}
    assert learned == {"127.0.0.1/js/", "127.0.0.1/js/item/"}  # not the static /about
    stats = {name: nodes.total(name) for name in (
        "render/auto/decided/plain", "render/auto/decided/render",
        "render/auto/mispredicted/plain", "render/auto/plain_ok")}  # fmt: skip
    # fetched plainly: the static page, and the JS pages met before their pattern
    # was learned (a render node fetches plain work too); the rest straight away
    assert stats["render/auto/plain_ok"] == 1  # /about
    assert 2 <= stats["render/auto/mispredicted/plain"] < len(JS_PAGES) / 2
    assert stats["render/auto/decided/render"] > len(JS_PAGES) / 2
    assert stats["render/auto/decided/plain"] == stats["render/auto/mispredicted/plain"] + 1
    assert "/about" in {path for path, uas in agents(demo_site).items() if "plain-1" in uas}

    # a second crawl: every node renders those pages straight away
    seed(redis_url, "--crawl", "second", demo_site.url + "/js/")
    nodes.start("jsshop", redis_url, {"render": "auto"}, NODE_ID="p2", USER_AGENT="plain-2", **auto)
    nodes.start("jsshop", redis_url, {"render": "auto"}, NODE_ID="r2", USER_AGENT="render-2",
                **RENDER, **auto)  # fmt: skip
    assert nodes.wait(180) == [0, 0, 0, 0], nodes.tail()
    seen = agents(demo_site)
    assert not {path for path, uas in seen.items() if "plain-2" in uas} & JS_PAGES
    assert all("render-2" in seen[path] for path in JS_PAGES)
    for node in (2, 3):
        assert nodes.stat(node, "render/auto/decided/plain") == 0
        assert nodes.stat(node, "render/auto/mispredicted/plain") == 0
    assert nodes.stat(3, "render/pages") == len(JS_PAGES)


@needs_browser
@pytest.mark.alone  # its looping page keeps a core busy: beside other tests a plain page timed out
def test_hostile_pages_are_bounded_and_dead_lettered_with_the_reason(
    redis_url, redis_client, demo_site, render_nodes, tmp_path
):
    nodes = render_nodes
    hostile = [f"{demo_site.url}/js/hostile/{name}" for name in jspages.HOSTILE]
    seed(redis_url, *hostile, demo_site.url + "/js/item/1")
    # hung pages cut at 10 s, tried twice: the loop keeps a core busy (defaults: 106 s CPU, not 36)
    render = nodes.start(
        "jsshop", redis_url, NODE_ID="r1", **RENDER, **SETTINGS,
        RENDER_PAGE_TIMEOUT=10, RETRY_TIMES=1, RETRY_BACKOFF_BASE=0.2, RETRY_BACKOFF_MAX=0.5,
    )  # fmt: skip
    browser: list[int] = []
    while render.poll() is None and len(browser) < 200:  # every browser it starts, sampled
        browser += [pid for pid in browsers_below(render) if pid not in browser]
        time.sleep(0.2)
    assert browser and nodes.wait(240) == [0], nodes.tail()
    dead = {}
    for raw in redis_client.lrange("jsshop:dlq", 0, -1):
        record = json.loads(raw)
        dead[record["url"].rpartition("/")[2]] = record["error"]
    assert set(dead) == {"loop", "alloc", "noload", "download"}, dead
    assert "RENDER_PAGE_TIMEOUT" in dead["loop"] or "failed the page" in dead["loop"]
    assert "RENDER_PAGE_TIMEOUT" in dead["noload"] or "Timeout" in dead["noload"]
    assert "download" in dead["download"].lower()
    items = {
        re.sub(r"^http://[^/]+", "", item["url"]): item for item in read_items(tmp_path / "items")
    }
    assert items["/js/hostile/popup"]["title"] == "Popup"  # stored, no window opened:
    assert nodes.stat(0, "render/popups_closed") == 0  # window.open gave null
    assert items["/js/item/1"]["title"] == "Item 1"  # the rest of the crawl went on
    assert nodes.stat(0, "render/pages_opened") == nodes.stat(0, "render/pages_closed") > 0
    # hung or not, every browser it started is gone
    wait_for(lambda: alive(browser) == [], 15, "the node's browsers gone")


@needs_browser
def test_browsers_are_replaced_and_memory_stays_flat_over_a_long_rendered_crawl(
    redis_url, redis_client, demo_site, render_nodes, tmp_path
):
    nodes = render_nodes
    pages, per_browser = 48, 10
    seed(redis_url, *(f"{demo_site.url}/js/item/{n % JS_ITEMS + 1}?v={n}" for n in range(pages)))
    nodes.start("jsshop", redis_url, NODE_ID="r1", **RENDER, **SETTINGS,
                RENDER_PAGES_PER_BROWSER=per_browser)  # fmt: skip
    assert nodes.wait(300) == [0], nodes.tail()
    assert nodes.stat(0, "render/pages") >= pages
    assert nodes.stat(0, "render/browser_replaced/pages") >= pages // per_browser - 1
    assert nodes.stat(0, "render/pages_opened") == nodes.stat(0, "render/pages_closed") > 0
    held = [int(mb) for mb in re.findall(r"replacing the browser \(pages\).* held (\d+) MB",
                                         nodes.log(0))]  # fmt: skip
    assert len(held) >= 4
    # what a browser holds when it is replaced does not grow from one to the next
    assert max(held[1:]) <= 1.5 * held[0] + 100, held


@needs_browser
def test_the_requests_proxy_and_identity_are_the_browsers_too(
    redis_url, redis_client, demo_site, render_nodes, tmp_path
):
    proxy = services.start_forward_proxy(auth=f"crawler:{SECRET}")
    try:
        nodes = render_nodes
        # a start entry brings its page actions: the table is loaded by fetch
        wait = [{"method": "wait_for_selector", "args": ["tr.row"]}]
        redis_client.lpush("jsshop:start_urls", json.dumps(
            {"url": demo_site.url + "/js/data", "meta": {"render_actions": wait}}))  # fmt: skip
        nodes.start("jsshop", redis_url, NODE_ID="r1", USER_AGENT="render-node", **RENDER,
                    **SETTINGS, ROTATING_PROXY_LIST=with_credentials(proxy))  # fmt: skip
        assert nodes.wait(120) == [0], nodes.tail()
        items = {re.sub(r"^http://[^/]+", "", i["url"]): i for i in read_items(tmp_path / "items")}
        assert items["/js/data"]["rows"] == 5
        through = {}
        for entry in proxied(proxy):
            through.setdefault(entry["url"].removeprefix(demo_site.url), set()).add(
                entry["user_agent"]
            )
        # the page and what its script fetched went through the (authenticated) proxy,
        # with the request's user agent
        assert through["/js/data"] == {"render-node"}
        assert through["/js/api/data.json"] == {"render-node"}
        assert nodes.stat(0, "render/pages") >= 1
        dump = [redis_client.dump(key) or b"" for key in redis_client.keys("*")]
        assert not any(SECRET.encode() in value for value in dump)
        assert SECRET not in nodes.log(0)
    finally:
        proxy.stop()


@needs_browser
def test_a_rendered_page_is_recrawled_and_its_changes_told_from_the_page(
    redis_url, redis_client, render_nodes, tmp_path
):
    site = services.start_demo_site()
    try:
        nodes = render_nodes
        redis_client.lpush("site:start_urls", site.url + "/changing/")
        node = nodes.start("site", redis_url, spider_args={"allow": "/changing/"}, **RENDER,
                           RENDER_URLS=json.dumps(["/changing/"]),
                           RECRAWL_RULES=json.dumps({"/changing/[0-9]": 0.5}),
                           NODE_HEARTBEAT_INTERVAL=0.3, MAX_IDLE_TIME_BEFORE_CLOSE=0)  # fmt: skip
        # again and again: a recrawl never ends, so the node is stopped once each
        # page came back four times (however long a busy machine's browser takes)
        wait_for(lambda: all(site_hits(site).get(f"/changing/{n}", 0) >= 4 for n in (1, 2, 3)),
                 120, "every page recrawled")  # fmt: skip
        node.send_signal(signal.SIGINT)
        assert nodes.wait(60) == [0], nodes.tail()
        with urllib.request.urlopen(site.url + "/__not_modified", timeout=10) as answer:
            not_modified = json.load(answer)
        stats = nodes.stats(0)
        hits = site_hits(site)
        # every answer the node got was rendered (but robots.txt); a render the
        # stop cut short is no answer
        assert stats["render/pages"] == stats["downloader/response_count"] - 1
        assert sum(hits.values()) - 1 - stats["render/pages"] in range(4)
        # a browser cannot take a 304 it did not ask for: fetched whole, and the
        # change told from the rendered page
        assert not_modified == {} and stats.get("downloader/exception_count", 0) == 0
        assert stats["recrawl/changed"] >= 3 and stats["recrawl/unchanged"] >= 3
    finally:
        site.stop()


def test_a_plain_node_told_not_to_wait_for_render_nodes_closes(
    redis_url, redis_client, demo_site, render_nodes
):
    nodes = render_nodes
    seed(redis_url, demo_site.url + "/js/")
    nodes.start("jsshop", redis_url, NODE_ID="plain", RENDER_WAIT_FOR_NODES=False,
                **{**SETTINGS, "MAX_IDLE_TIME_BEFORE_CLOSE": 2})  # fmt: skip
    assert nodes.wait(60) == [0], nodes.tail()
    assert "not waiting for them" in nodes.log(0)
    # the render work stays queued for a render node
    assert crawl_status(redis_client, SpiderKeys.for_spider("jsshop"))["render_queued"] == 1


@needs_browser
def test_a_browser_that_crashes_or_outgrows_its_memory_is_replaced_and_its_pages_retried(
    redis_url, redis_client, demo_site, render_nodes, tmp_path
):
    nodes = render_nodes
    seed(redis_url, demo_site.url + "/js/")
    render = nodes.start("jsshop", redis_url, NODE_ID="r1", **RENDER, **SETTINGS,
                         RENDER_MEMORY_LIMIT_MB=64, RETRY_BACKOFF_BASE=0.2)  # fmt: skip
    items_dir = tmp_path / "items"
    wait_for(lambda: len(read_items(items_dir)) >= 5, 60, "the render node under way")

    def crash_the_browser() -> bool:
        """The browser's processes killed; whether the node saw its browser go.
        (Its browser is replaced every few pages here: processes found just as
        one retires, or before the next is launched, are not its browser.)"""
        browser = browsers_below(render)
        for pid in browser:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        # 10 s for the node to see it (killed every second, a slow one never launched)
        seen = (time.sleep(0.5) or "the browser disconnected" in nodes.log(0) for _ in range(20))
        return bool(browser) and any(seen)

    wait_for(crash_the_browser, 60, "a browser crash the node saw")
    assert nodes.wait(180) == [0], nodes.tail()
    assert js_paths(read_items(items_dir)) == JS_PAGES  # the pages it had open were retried
    assert nodes.stat(0, "render/browser_lost") >= 1
    # past RENDER_MEMORY_LIMIT_MB, a browser is replaced once its pages are done
    assert nodes.stat(0, "render/browser_replaced/memory") >= 1
    assert nodes.stat(0, "playwright/page_count") >= len(JS_PAGES)
