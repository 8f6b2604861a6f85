"""Coming from scrapy-redis: its settings honoured or named, its spiders' habits kept."""

import logging

import pytest
from scrapy import Request
from scrapy.settings import Settings

from extensions import compat, config, connection
from extensions.addon import DistributedAddon
from extensions.exceptions import ConfigError
from extensions.frontier.dupefilter import RedisDupeFilter
from extensions.frontier.frontier import Frontier
from extensions.frontier.redisops import push_start_entries
from extensions.frontier.start_urls import EntryRules, StartLeases, parse_entry
from extensions.keys import SpiderKeys
from servers.clients import redis_at
from tests.conftest import read_items, scrapy, site_hits


def project(**values) -> Settings:
    settings = Settings()
    settings.setdict(values, priority="project")
    return settings


def test_a_half_done_switch_is_taken_over_with_a_warning(caplog):
    settings = project(SCHEDULER="scrapy_redis.scheduler.Scheduler",
                       DUPEFILTER_CLASS="scrapy_redis.dupefilter.RFPDupeFilter")  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="extensions.compat"):
        DistributedAddon().update_settings(settings)
    assert settings["SCHEDULER"] == compat.SCHEDULER
    assert settings["DUPEFILTER_CLASS"] == compat.DUPEFILTER
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "SCHEDULER = scrapy_redis.scheduler.Scheduler is left over" in said
    assert "DUPEFILTER_CLASS = scrapy_redis.dupefilter.RFPDupeFilter is left over" in said


def test_another_scheduler_is_refused_with_one_line():
    with pytest.raises(ConfigError, match=r"SCHEDULER = 'myproject\.MyScheduler'"):
        DistributedAddon().update_settings(project(SCHEDULER="myproject.MyScheduler"))


def test_redis_host_port_and_params_reach_the_same_server(redis_url):
    port = int(redis_url.rsplit(":", 1)[1].split("/")[0])
    settings = project(REDIS_HOST="127.0.0.1", REDIS_PORT=port,
                       REDIS_PARAMS={"db": 3, "socket_timeout": 4})  # fmt: skip
    DistributedAddon().update_settings(settings)
    assert connection.redis_url(settings) == f"redis://127.0.0.1:{port}/3"
    client = connection.from_settings(settings)
    assert client.connection_pool.connection_kwargs["socket_timeout"] == 4
    client.set("written-through-host-port", 1)
    assert redis_at(redis_url.rsplit("/", 1)[0] + "/3").get("written-through-host-port")
    # REDIS_URL set by the project wins, as in scrapy-redis
    both = project(REDIS_URL="redis://10.9.9.9:1/0", REDIS_HOST="127.0.0.1")
    assert connection.redis_url(both) == "redis://10.9.9.9:1/0"
    with_password = project(REDIS_HOST="h", REDIS_PARAMS={"password": "p@ss"})
    assert connection.redis_url(with_password) == "redis://:p%40ss@h:6379/0"


def test_idle_close_settings_mean_what_they_mean_in_scrapy_redis():
    assert compat.max_idle_time(project(SCHEDULER_IDLE_BEFORE_CLOSE=7)) == 7
    both = project(SCHEDULER_IDLE_BEFORE_CLOSE=7, MAX_IDLE_TIME_BEFORE_CLOSE=3)
    assert compat.max_idle_time(both) == 3
    assert config.problems(project(MAX_IDLE_TIME_BEFORE_CLOSE=-1)) == []  # close at once


def test_settings_without_meaning_here_are_named_and_unsupported_ones_refused(caplog):
    settings = project(SCHEDULER_QUEUE_CLASS="scrapy_redis.queue.FifoQueue",
                       SCHEDULER_SERIALIZER="pickle", REDIS_PARAMS={"health_check": 3})  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="extensions.compat"):
        said = compat.warn_ignored(settings)
    assert said == ["SCHEDULER_QUEUE_CLASS", "SCHEDULER_SERIALIZER", "REDIS_PARAMS[health_check]"]
    assert "never pickle" in caplog.text
    assert config.problems(project(REDIS_START_URLS_AS_SET=True)) == []
    both = config.problems(project(REDIS_START_URLS_AS_SET=True, REDIS_START_URLS_AS_ZSET=True))
    assert len(both) == 1 and "both on" in both[0]


@pytest.mark.parametrize("start_type", ["list", "set", "zset"])
def test_start_keys_of_each_scrapy_redis_type_are_leased_and_handed_back(redis_client, start_type):
    keys = SpiderKeys.for_spider("s", start_type=start_type)
    frontier = Frontier(redis_client, keys, "n1")
    push_start_entries(redis_client, keys, [b"http://a/1", b"http://a/2"], score=1)
    push_start_entries(redis_client, keys, [b"http://a/top"], score=5)
    assert redis_client.type(keys.start_urls).decode() == start_type
    assert frontier.sizes().start_urls == 3
    leases = StartLeases(redis_client, keys, "n1")
    taken = leases.take(2)
    expected = {"list": [b"http://a/1", b"http://a/2"], "zset": [b"http://a/top", b"http://a/2"]}
    if start_type in expected:
        assert taken == expected[start_type]  # the oldest first; the highest score first
    assert frontier.sizes().start_urls == 3  # leased entries still count
    # the node dies: what it took goes back where it is read first
    assert frontier.reclaim(60, closing_node="n1").start_urls == {"n1": 2}
    assert frontier.sizes().start_urls == 3
    again = StartLeases(redis_client, keys, "n2").take(3)
    assert sorted(again) == [b"http://a/1", b"http://a/2", b"http://a/top"]
    if start_type == "list":
        assert again[:2] == taken


def test_a_zset_start_key_is_seeded_and_crawled_highest_score_first(
    redis_url, redis_client, demo_site, nodes
):
    zset = ("-s", f"REDIS_URL={redis_url}", "-s", "REDIS_START_URLS_AS_ZSET=True")
    seeded = scrapy("seed", "shop", demo_site.url + "/about", "--score", "3", *zset)
    assert seeded.returncode == 0, seeded.stderr
    assert redis_client.zscore("shop:start_urls", demo_site.url + "/about") == 3
    without = scrapy("crawl", "shop", "-s", f"REDIS_URL={redis_url}")
    assert without.returncode == 1
    assert "shop:start_urls is a zset" in without.stderr
    assert "with REDIS_START_URLS_AS_ZSET = True it is read as one" in without.stderr
    nodes.start("shop", redis_url, MAX_IDLE_TIME_BEFORE_CLOSE=1, REDIS_START_URLS_AS_ZSET=True)
    assert nodes.wait(60) == [0], nodes.tail()
    assert "/about" in site_hits(demo_site)
    assert not redis_client.exists("shop:start_urls")


def test_dupefilter_from_settings_works_standalone(redis_url):
    dupefilter = RedisDupeFilter.from_settings(project(REDIS_URL=redis_url))
    assert dupefilter.key.startswith("dupefilter:")
    assert dupefilter.request_seen(Request("http://example.com/")) is False
    assert dupefilter.request_seen(Request("http://example.com/")) is True


def test_a_start_url_pushed_again_can_be_fetched_again():
    assert parse_entry(b"http://example.com/").to_request().dont_filter is False
    again = EntryRules(dont_filter=True)
    assert parse_entry(b"http://example.com/", again).to_request().dont_filter is True
    assert (
        parse_entry(b'{"url": "http://example.com/", "dont_filter": false}', again).dont_filter
        is False
    )
    latin = EntryRules(encoding="latin-1")
    assert parse_entry("http://example.com/caf\xe9".encode("latin-1"), latin).url.endswith("\xe9")


def test_a_plain_spider_closes_when_the_work_is_done_and_cannot_be_seeded(
    redis_url, demo_site, nodes, tmp_path
):
    refused = scrapy("seed", "plain", demo_site.url + "/", "-s", f"REDIS_URL={redis_url}",
                     "-s", "SPIDER_MODULES=tests.spiders")  # fmt: skip
    assert refused.returncode == 2
    assert "does not read start URLs from Redis" in refused.stderr
    # no MAX_IDLE_TIME_BEFORE_CLOSE: a spider that reads no start URLs from Redis closes
    nodes.start("plain", redis_url, SPIDER_MODULES="tests.spiders",
                spider_args={"start": demo_site.url + "/about"})  # fmt: skip
    assert nodes.wait(120) == [0], nodes.tail()
    assert "/about" in site_hits(demo_site)
    assert [item["url"] for item in read_items(tmp_path / "items")] == [demo_site.url + "/about"]


def test_items_keyed_on_another_field_say_how_and_an_item_class_can_name_its_key(
    make_store, mongo_db, caplog
):
    store = make_store()
    with caplog.at_level(logging.WARNING, logger="extensions.pipelines.mongo"):
        report = store.write([{"link": "http://a/1"}, {"link": "http://a/2"}])
    assert report.rejected == 2
    hints = [r for r in caplog.records if "set item_key_field" in r.getMessage()]
    assert len(hints) == 1  # the first rejected item says how, once
    keyed = [
        {"link": "http://a/1", "_key_field": "link"},
        {"link": "http://a/1", "_key_field": "link"},
    ]
    assert store.write(keyed).written == 2
    _, _, db = mongo_db
    stored = list(db["items"].find({"link": "http://a/1"}))
    assert len(stored) == 1 and "_key_field" not in stored[0]


def test_scrapy_redis_state_in_redis_is_named_with_what_to_do(redis_url, redis_client):
    redis_client.sadd("shop:dupefilter", "0123456789abcdef")
    redis_client.zadd("shop:requests", {b"\x80\x05\x95pickled": 0})
    settings = ("-s", f"REDIS_URL={redis_url}")
    crawl = scrapy("crawl", "shop", *settings)
    assert crawl.returncode == 1
    assert "shop:dupefilter is a set, where this crawler keeps a hash" in crawl.stderr
    assert "Traceback" not in crawl.stderr
    status = scrapy("status", "shop", *settings)
    assert status.returncode == 1
    assert "shop:dupefilter is a set" in status.stderr and "another spider name" in status.stderr
    redis_client.delete("shop:dupefilter")
    pickled = scrapy("status", "shop", *settings)
    assert pickled.returncode == 1 and "pickled requests" in pickled.stderr
