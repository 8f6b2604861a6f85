"""The downloader's send gate: a request that waited in its download slot while
its host came to be held goes back to wait in Redis instead of onto the wire
(real Redis; Scrapy's real downloader and middlewares)."""

import time

from scrapy import Request, Spider
from scrapy.core.downloader import Slot

from extensions.downloader import GatedDownloader, send_gate_of
from extensions.frontier.leased import leased_for
from extensions.meta import DELAY_UNTIL
from tests.conftest import crawler_with_addon
from tests.helpers import run_without_waiting


class Held(Spider):
    name = "held"


def test_a_request_of_a_host_held_while_it_waited_in_its_slot_is_parked_not_sent(redis_url):
    # no handler: a request that reached one would need a reactor this test has not
    no_handlers = {"http": None, "https": None}
    crawler = crawler_with_addon(Held, {"REDIS_URL": redis_url, "DOWNLOAD_HANDLERS": no_handlers})
    assert crawler.settings["DOWNLOADER"] == "extensions.downloader.GatedDownloader"
    crawler.stats.open_spider()
    downloader = GatedDownloader(crawler)  # its middlewares: the pushback one sets the gate
    gate_owner = send_gate_of(crawler).__self__
    leased = leased_for(crawler)
    page = Request("http://held.test/page", meta={"download_slot": "held.test"})
    leased.remember(page)
    page.headers["User-Agent"] = "added after the lease"
    page.meta["proxy"] = "http://proxy.test:8080"
    until = time.time() + 30
    gate_owner._held["held.test"] = until
    slot = Slot(8, 0.0, 0.0)

    parked = run_without_waiting(downloader._download(slot, page))

    assert isinstance(parked, Request) and parked is not page
    assert parked.url == page.url and parked.dont_filter
    assert parked.meta[DELAY_UNTIL] == until  # with its host, until the hold ends
    # what the downloader's middlewares added goes: the next fetch chooses afresh
    assert "proxy" not in parked.meta and b"User-Agent" not in parked.headers
    assert not slot.transferring  # it never took a transfer slot
    assert crawler.stats.get_value("hosts/held_at_send") == 1
    assert crawler.stats.get_value("hosts/held_requests") == 1

    # what the gate lets through: robots.txt (not leased), other hosts, a hold over
    robots = Request("http://held.test/robots.txt")
    other = Request("http://other.test/")
    leased.remember(other)
    assert gate_owner.held_at_send(robots) is None
    assert gate_owner.held_at_send(other) is None
    gate_owner._held["held.test"] = time.time() - 1
    assert gate_owner.held_at_send(page) is None
    assert crawler.stats.get_value("hosts/held_at_send") == 1


def test_a_project_that_names_its_own_downloader_keeps_it(redis_url):
    crawler = crawler_with_addon(
        Held, {"REDIS_URL": redis_url, "DOWNLOADER": "scrapy.core.downloader.Downloader"}
    )
    assert crawler.settings["DOWNLOADER"] == "scrapy.core.downloader.Downloader"
