"""The Redis key names users and scrapy-redis tooling rely on."""

import pytest
from scrapy.settings import Settings

from extensions import keys, keyspace
from extensions.exceptions import ConfigError
from tests.helpers import stack_settings


def test_scrapy_redis_compatible_names():
    k = keys.SpiderKeys.for_spider("shop")
    assert k.start_urls == "shop:start_urls"
    assert k.requests == "shop:requests"
    assert k.dupefilter == "shop:dupefilter"
    assert k.dlq == "shop:dlq"
    assert k.delayed == "shop:delayed"
    assert k.checkpoint == "shop:checkpoint"


def test_node_keys_share_the_spider_prefix():
    k = keys.SpiderKeys.for_spider("shop")
    assert k.nodes == "shop:nodes"
    assert k.leases("n1") == "shop:leases:n1"
    assert k.node("n1") == "shop:node:n1"
    spider_keys = [k.start_urls, k.requests, k.dupefilter, k.bloom_prefix, k.bloom_count,
                   k.delayed, k.nodes, k.checkpoint, k.dlq, k.proxies, k.queue("a.com"),
                   k.host("a.com"), k.ready, k.waiting, k.frontier, k.rates,
                   k.crawl_delay]  # fmt: skip
    assert all(key.startswith("shop:") for key in spider_keys)


def test_redis_cluster_puts_a_hash_tag_on_every_key():
    settings = stack_settings({"REDIS_CLUSTER": "True"})
    k = keys.SpiderKeys.from_settings("shop", settings)
    assert k.name == "shop"
    assert (k.start_urls, k.requests, k.leases("n1")) == (
        "{shop}:start_urls", "{shop}:requests", "{shop}:leases:n1",
    )  # fmt: skip
    tagged = [k.start_urls, k.requests, k.dupefilter, k.bloom_prefix, k.bloom_count, k.delayed,
              k.nodes, k.checkpoint, k.dlq, k.proxies, k.queue("a.com"), k.host("a.com"),
              k.ready, k.waiting, k.frontier, k.rates, k.crawl_delay, k.node("n1")]  # fmt: skip
    assert all(key.startswith("{shop}:") for key in tagged)
    assert keys.SpiderKeys.from_settings("shop", settings, "q:%(name)s").start_urls == "q:{shop}"
    with pytest.raises(ValueError, match="must contain %\\(name\\)s"):
        keys.SpiderKeys.from_settings("shop", settings, "seeds")
    # without REDIS_CLUSTER, the names are scrapy-redis's
    assert keys.SpiderKeys.from_settings("shop", stack_settings()).requests == "shop:requests"


def test_keys_from_settings_without_the_stack_defaults_say_so_in_one_line():
    # bare Scrapy settings would read REDIS_START_URLS_KEY as None, not fail
    with pytest.raises(ConfigError, match=r"SpiderKeys\.from_settings needs the add-on"):
        keys.SpiderKeys.from_settings("shop", Settings({"REDIS_CLUSTER": True}))


def test_custom_start_urls_key_template():
    k = keys.SpiderKeys.for_spider("shop", "queues:%(name)s:seeds")
    assert k.start_urls == "queues:shop:seeds"


def test_every_key_is_documented():
    """Every key template keys.py builds is in the keyspace's table (extensions/keyspace.py)."""
    templates = [
        value
        for name, value in vars(keys).items()
        if name.isupper() and isinstance(value, str) and value.startswith("%(name)s:")
    ]
    assert len(templates) > 30
    for template in templates:
        shown = (
            template.replace("%(name)s", "NAME")
            .replace("%(node)s", "NODE")
            .replace("%(group)s", "GROUP")
            .replace("%(what)s", "WHAT")
            .replace("%(crawl)s", "ID")
            .replace("%(host)s", "HOST")
            .replace("%(domain)s", "DOMAIN")
            .replace("%(address)s", "ADDRESS")
            .replace("%(netloc)s", "NETLOC")
        )
        assert f"``{shown}" in keyspace.__doc__, shown
