"""What a node decides about rendering before any browser runs: page actions
checked as the hostile JSON they may be, URL patterns, which requests render."""

import base64
import json

import pytest
from scrapy import Request, Spider
from scrapy.settings import Settings

from extensions.exceptions import InvalidStartURL, SerializationError
from extensions.frontier.serializer import dumps_request, loads_request
from extensions.frontier.start_urls import parse_entry
from extensions.render.actions import check_actions, page_methods, render_meta_problem
from extensions.render.handler import proxy_context
from extensions.render.policy import RenderPolicy, compile_patterns, url_pattern
from extensions.render.setup import HANDLER, RenderRoom, install, renders_here

SCRIPTS = {"count_rows": "() => document.querySelectorAll('tr').length"}


class JsSpider(Spider):
    name = "js"
    render_scripts = SCRIPTS


def test_known_page_actions_pass_as_plain_json():
    actions = [
        {"method": "wait_for_selector", "args": ["#app h1"], "kwargs": {"timeout": 5000}},
        {"method": "click", "args": ["button.more"]},
        {"method": "scroll", "kwargs": {"times": 5, "wait": 200}},
        {"method": "evaluate", "args": ["count_rows"]},
    ]
    assert check_actions(json.loads(json.dumps(actions)), SCRIPTS)[3]["args"] == ["count_rows"]
    methods = page_methods(check_actions(actions, SCRIPTS), SCRIPTS)
    assert [m.method for m in methods][:2] == ["wait_for_selector", "click"]
    assert callable(methods[2].method) and methods[2].kwargs == {"times": 5, "wait": 200}
    # a script name becomes the spider's script, never the entry's text
    assert methods[3].args == (SCRIPTS["count_rows"],)


@pytest.mark.parametrize(
    ("actions", "says"),
    [
        ({"method": "click"}, "must be a list"),
        (["click"], "is not {'method'"),
        ([{"method": "goto", "args": ["http://evil/"]}], "'goto' is not a page action"),
        ([{"method": "add_init_script", "args": ["x"]}], "is not a page action"),
        ([{"method": "evaluate", "args": ["fetch('http://evil/')"]}], "render_scripts"),
        ([{"method": "evaluate", "args": ["unknown"]}], "render_scripts"),
        ([{"method": "wait_for_function", "args": []}], "render_scripts"),
        ([{"method": "click", "args": ["a", "b"]}], "at most 1 arguments"),
        ([{"method": "click", "args": ["x" * 5000]}], "too large"),
        ([{"method": "click", "args": ["a"], "kwargs": {"path": "/etc"}}], "unknown kwargs"),
        ([{"method": "wait_for_timeout", "args": [10**9]}], "a wait of"),
        ([{"method": "scroll", "kwargs": {"times": 10_000}}], "times must be"),
        ([{"method": "click", "args": ["a"], "kwargs": {"times": 2}}], "scroll's"),
        ([{"method": "click", "args": ["a"], "extra": 1}], "unknown keys"),
        ([{"method": "click", "args": ["a"]}] * 21, "at most 20"),
    ],
)
def test_page_actions_a_node_refuses_say_why(actions, says):
    problem = render_meta_problem({"render_actions": actions}, SCRIPTS)
    assert problem is not None and says in problem


def test_a_queue_entry_with_bad_page_actions_is_refused_on_load():
    spider = JsSpider()
    good = Request("http://h/js", meta={"render": True, "render_actions": [
        {"method": "evaluate", "args": ["count_rows"]}]})  # fmt: skip
    assert loads_request(dumps_request(good, spider), spider).meta["render"] is True
    entry = {"url": "http://h/js", "meta": {"render": True, "render_actions": [
        {"method": "evaluate", "args": ["document.cookie"]}]}}  # fmt: skip
    with pytest.raises(SerializationError, match="render_scripts"):
        loads_request(json.dumps(entry), spider)
    for meta in ({"render": "yes"}, {"render_check": "always"}):
        with pytest.raises(SerializationError, match="not"):
            loads_request(json.dumps({"url": "http://h/", "meta": meta}), spider)


def test_a_start_entry_may_ask_for_rendering_with_checked_actions():
    entry = parse_entry(json.dumps({"url": "http://h/js", "meta": {
        "render": True, "render_actions": [{"method": "scroll"}]}}))  # fmt: skip
    assert entry.meta["render"] is True
    with pytest.raises(InvalidStartURL, match="not a page action"):
        parse_entry(json.dumps({"url": "http://h/", "meta": {
            "render_actions": [{"method": "route"}]}}))  # fmt: skip
    with pytest.raises(InvalidStartURL, match="render"):
        parse_entry(json.dumps({"url": "http://h/", "meta": {"render": 1}}))


def test_a_url_pattern_is_its_host_and_directory():
    assert url_pattern("http://Shop.example/js/item/17?x=1") == "shop.example/js/item/"
    assert url_pattern("http://shop.example/js/item/17/reviews") == "shop.example/js/item/*/"
    assert url_pattern("http://shop.example/js/") == "shop.example/js/"
    assert url_pattern("http://shop.example/js/list") == "shop.example/js/"
    assert url_pattern("http://shop.example/") == "shop.example/"
    assert url_pattern("http://shop.example/a/b/c/d/e/f") == "shop.example/a/b/c/"
    assert url_pattern("http://shop.example/" + "x" * 500 + "/p") == f"shop.example/{'x' * 64}/"


def test_render_urls_mark_requests_and_the_spiders_word_stands():
    policy = RenderPolicy(compile_patterns([r"/js/"]), stats=_Stats())
    rendered, plain, refused = (
        Request("http://h/js/1"),
        Request("http://h/1"),
        Request("http://h/js/2", meta={"render": False}),
    )
    for request in (rendered, plain, refused):
        policy.decide(request)
    assert rendered.meta["render"] is True
    assert "render" not in plain.meta
    assert refused.meta["render"] is False


class _Stats:
    def __init__(self):
        self.values = {}

    def inc_value(self, key, count=1):
        self.values[key] = self.values.get(key, 0) + count


def test_a_proxy_is_the_browser_contexts_own():
    name, option = proxy_context("http://user:p%40ss@proxy.example:3128")
    assert name == "proxy:http://proxy.example:3128"
    assert option == {"server": "http://proxy.example:3128", "username": "user",
                      "password": "p@ss", "bypass": "<-loopback>"}  # fmt: skip
    assert proxy_context("proxy.example:8000")[1] == {
        "server": "http://proxy.example:8000", "bypass": "<-loopback>"}  # fmt: skip
    # the credentials Scrapy's proxy middleware moved into its header
    header = b"Basic " + base64.b64encode(b"crawler:secret")
    _, option = proxy_context("http://proxy.example:3128", header)
    assert (option["username"], option["password"]) == ("crawler", "secret")


def test_a_node_renders_only_when_enabled_and_a_browser_is_found(tmp_path):
    assert not renders_here(Settings({"RENDER_ENABLED": False}))
    missing = Settings({"RENDER_ENABLED": True, "RENDER_BROWSER": str(tmp_path / "none"),
                        "DOWNLOAD_HANDLERS": {}})  # fmt: skip
    assert not renders_here(missing)
    install(missing)
    assert missing["DOWNLOAD_HANDLERS"] == {}  # a plain node, said in the log
    browser = tmp_path / "chromium"
    browser.write_text("#!/bin/sh\n")
    browser.chmod(0o755)
    found = Settings({"RENDER_ENABLED": True, "RENDER_BROWSER": str(browser),
                      "DOWNLOAD_HANDLERS": {}})  # fmt: skip
    assert renders_here(found)
    install(found)
    assert found["DOWNLOAD_HANDLERS"] == {"http": HANDLER, "https": HANDLER}


def test_a_render_node_leases_render_work_for_the_pages_it_may_open():
    freed = []
    room = RenderRoom(4, lambda: freed.append(1))
    held = [Request(f"http://h/{n}", meta={"render": True}) for n in range(3)]
    for request in [*held, Request("http://h/plain")]:
        room.took(request)
    assert room.room() == 5  # two per page, less the three whose download is on
    room.left(held[0])  # its download ended: parsed and stored later, it holds no page
    room.left(held[0])
    assert room.room() == 6 and freed == [1]  # told once: the node looks again at once
    more = [Request(f"http://h/more{n}", meta={"render": True}) for n in range(20)]
    for request in more:
        room.took(request)
    assert room.room() == 0
    nothing = RenderRoom(0)
    nothing.took(held[1])
    assert nothing.room() == 0  # a node that cannot render takes none
