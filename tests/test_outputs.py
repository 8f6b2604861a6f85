"""A callback's output without Scrapy's per-response worker tasks: requests
scheduled as yielded, a task an item, at most CONCURRENT_ITEMS at once."""

import asyncio
import json
import logging

from scrapy import Request, Spider
from scrapy.utils.test import get_crawler

from extensions import engine
from extensions.outputs import SpiderOutputTasks, process_outputs
from tests.conftest import read_items


def run_outputs(outputs, limit, process) -> int:
    return asyncio.run(process_outputs(outputs, limit, process))


def test_a_request_is_scheduled_as_it_is_yielded_and_items_wait_in_at_most_limit_tasks():
    done: list[str] = []
    held = {"now": 0}

    async def process(output):
        if isinstance(output, Request):
            done.append(output.url)
            return
        held["now"] += 1
        try:
            await asyncio.sleep(0.01)
        finally:
            held["now"] -= 1
        done.append(output["n"])

    async def callback():
        yield {"n": 0}
        yield {"n": 1}
        yield Request("http://127.0.0.1/next")
        # scheduled before the callback went on, while the items still wait
        assert done == ["http://127.0.0.1/next"]
        for n in range(2, 6):
            yield {"n": n}

    assert run_outputs(callback(), 3, process) == 3
    assert sorted(done[1:]) == list(range(6))  # every item, once
    assert held["now"] == 0


def test_an_error_with_one_output_is_logged_and_the_others_go_on(caplog):
    done = []

    async def process(output):
        name = output.url if isinstance(output, Request) else output
        if "bad" in name:
            raise ValueError(f"cannot take {name}")
        done.append(name)

    async def callback():
        yield Request("http://127.0.0.1/bad")
        yield "bad item"
        yield "good item"
        yield Request("http://127.0.0.1/good")

    with caplog.at_level(logging.ERROR, logger="extensions.outputs"):
        run_outputs(callback(), 2, process)
    assert sorted(done) == ["good item", "http://127.0.0.1/good"]
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 2
    assert {str(r.exc_info[1]) for r in errors} == {
        "cannot take http://127.0.0.1/bad", "cannot take bad item"
    }  # fmt: skip


def test_concurrent_items_below_one_still_processes_one_at_a_time():
    # Scrapy's workers would take nothing at all with 0
    assert SpiderOutputTasks.from_crawler(get_crawler(Spider, {"CONCURRENT_ITEMS": 0})).limit == 1


def test_the_scrapy_pinned_has_what_the_output_handling_needs_and_another_scraper_is_left_alone():
    crawler = get_crawler(Spider, {})
    crawler.spider = crawler._create_spider("outputs")
    crawler.engine = crawler._create_engine()

    async def problem():  # asyncio's loop running, as under a node's reactor
        return engine.output_seam_problem(crawler)

    assert asyncio.run(problem()) is None

    class OwnScraper(type(crawler.engine.scraper)):
        pass

    crawler.engine.scraper.__class__ = OwnScraper
    assert asyncio.run(problem()) == "the engine's scraper is OwnScraper, not Scrapy's own"


def test_a_node_sends_every_item_once_holds_concurrent_items_and_reports_a_broken_callback(
    redis_url, redis_client, demo_site, nodes, tmp_path
):
    redis_client.lpush("outputs:start_urls", demo_site.url + "/")
    nodes.start(
        "outputs", redis_url, SPIDER_MODULES="tests.spiders", MAX_IDLE_TIME_BEFORE_CLOSE=1,
        ITEM_PIPELINES=json.dumps({"tests.pipelines.WaitingPipeline": 100}), CONCURRENT_ITEMS=4,
    )  # fmt: skip
    assert nodes.wait(120) == [0], nodes.tail()

    urls = sorted(item["url"] for item in read_items(tmp_path / "items"))
    home, about = demo_site.url + "/", demo_site.url + "/about"
    expected = [f"{home}?item={n}" for n in range(12)] + [f"{about}?item=a", f"{about}?item=b"]
    assert urls == sorted(expected)
    stats = nodes.stats(0)
    assert stats["test/items_held_at_once"] == 4  # twelve items waiting, four at a time
    assert stats["spider_exceptions/RuntimeError"] == 1
    log = nodes.log(0)
    assert "the callback broke after two items" in log
    assert "Callback output: requests scheduled as yielded, a task an item, at most 4" in log
    assert stats["spider_output/items_at_once"] == 4
