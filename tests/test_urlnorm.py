"""The URL normalizer chain: each shipped normalizer, the chain built from
settings, bad settings refused at start, and a normalizer that fails leaving
the URL as it was. No server: URLs in, URLs out."""

from __future__ import annotations

import pytest
from scrapy.settings import Settings

from extensions import config, defaults
from extensions.exceptions import ConfigError
from extensions.urlnorm.chain import Normalizing, UrlNormalizerChain
from extensions.urlnorm.normalizers import (
    BasicNormalizer,
    HostRulesNormalizer,
    SessionIdNormalizer,
    SortedQueryNormalizer,
    TrackingParametersNormalizer,
)


def project_settings(**overrides) -> Settings:
    settings = Settings()
    for name in dir(defaults):
        if name.isupper():
            settings.set(name, getattr(defaults, name), "default")
    settings.setdict(overrides, "project")
    return settings


def chain(**overrides) -> UrlNormalizerChain:
    built = UrlNormalizerChain.from_settings(project_settings(**overrides))
    assert built is not None
    return built


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("HTTP://Example.COM/a", "http://example.com/a"),
        ("http://example.com:80/a", "http://example.com/a"),
        ("https://example.com:443", "https://example.com/"),
        ("https://example.com:8443/a", "https://example.com:8443/a"),
        ("http://example.com/a#section", "http://example.com/a"),
        ("http://example.com/a?", "http://example.com/a"),
        ("http://[2001:DB8::1]:80/a", "http://[2001:db8::1]/a"),
        ("http://Me@Example.com/", "http://Me@example.com/"),  # the user part is the server's
        ("http://example.com/A/Path?Q=V", "http://example.com/A/Path?Q=V"),  # paths keep their case
        ("http://[::1/a", "http://[::1/a"),  # unreadable: left for the URL policy to refuse
    ],
)
def test_the_basic_normalizer_changes_only_what_never_names_another_page(url, expected):
    assert BasicNormalizer().normalize(url) == expected


def test_tracking_parameters_go_and_the_rest_keep_their_bytes():
    normalizer = TrackingParametersNormalizer()
    url = "http://e.test/p?utm_source=x&id=%41+b&UTM_Medium=y&gclid=1&fbclid=2&q=a%26b"
    assert normalizer.normalize(url) == "http://e.test/p?id=%41+b&q=a%26b"
    assert normalizer.normalize("http://e.test/p?utm_source=x") == "http://e.test/p"
    assert normalizer.normalize("http://e.test/p?a=1&&b=2&") == "http://e.test/p?a=1&b=2"
    # an encoded name is the name a server reads
    assert normalizer.normalize("http://e.test/p?utm%5Fsource=x&a=1") == "http://e.test/p?a=1"
    unchanged = "http://e.test/p?utmost=1&page=2"
    assert normalizer.normalize(unchanged) is unchanged


def test_session_ids_go_from_paths_and_queries():
    normalizer = SessionIdNormalizer()
    assert (normalizer.normalize("http://e.test/shop;jsessionid=0A1B2C/item?x=1")
            == "http://e.test/shop/item?x=1")  # fmt: skip
    assert normalizer.normalize("http://e.test/a;JSESSIONID=9") == "http://e.test/a"
    assert normalizer.normalize("http://e.test/a?PHPSESSID=abc&p=2") == "http://e.test/a?p=2"
    assert (
        normalizer.normalize("http://e.test/a?q=x;jsessionid=1")
        == "http://e.test/a?q=x;jsessionid=1"
    )
    assert normalizer.normalize("http://e.test/a;type=b") == "http://e.test/a;type=b"


def test_query_pairs_are_sorted_by_name_keeping_a_names_values_in_order():
    normalizer = SortedQueryNormalizer()
    assert normalizer.normalize("http://e.test/?b=2&a=1&b=1") == "http://e.test/?a=1&b=2&b=1"
    assert normalizer.normalize("http://e.test/?a=1&b=2") == "http://e.test/?a=1&b=2"
    assert normalizer.normalize("http://e.test/?z") == "http://e.test/?z"


def test_host_rules_apply_to_the_host_and_the_names_under_it():
    normalizer = HostRulesNormalizer({
        "shop.test": {"drop": ["ref", "view*"], "rewrite": [[r"/print/", "/"]]},
    })  # fmt: skip
    assert (normalizer.normalize("http://www.shop.test/print/item?ref=mail&view=grid&id=3")
            == "http://www.shop.test/item?id=3")  # fmt: skip
    assert (
        normalizer.normalize("http://other.test/print/x?ref=1") == "http://other.test/print/x?ref=1"
    )
    assert normalizer.normalize("http://notshop.test/print/x") == "http://notshop.test/print/x"


def test_the_default_chain_makes_every_variant_of_a_page_one_url():
    built = chain(URL_HOST_RULES={"shop.test": {"drop": ["sort"]}})
    page = "http://shop.test/item?colour=red&id=3"
    variants = [
        "HTTP://SHOP.TEST:80/item?id=3&colour=red",
        "http://shop.test/item?utm_source=news&id=3&colour=red#reviews",
        "http://shop.test/item;jsessionid=77?colour=red&PHPSESSID=1&id=3",
        "http://shop.test/item?sort=price&id=3&colour=red&fbclid=x",
    ]
    assert {built.normalize(url) for url in variants} == {page}
    assert built.normalize(page) == page  # once is enough: a second pass changes nothing
    steps = built.explain(variants[1])
    assert [step.name for step in steps] == ["Basic", "TrackingParameters", "SortedQuery"]
    assert steps[-1].after == page


def test_the_chain_can_be_changed_or_turned_off():
    assert UrlNormalizerChain.from_settings(project_settings(URL_NORMALIZE_ENABLED=False)) is None
    without_sorting = chain(
        URL_NORMALIZERS={"extensions.urlnorm.normalizers.SortedQueryNormalizer": None}
    )
    assert without_sorting.normalize("http://e.test/?b=1&a=2") == "http://e.test/?b=1&a=2"
    more = chain(URL_DROP_PARAMETERS=["ref"])
    assert more.normalize("http://e.test/?ref=x&a=1&utm_term=t") == "http://e.test/?a=1"


class Broken:
    def normalize(self, url: str) -> str:
        raise RuntimeError("boom")


class Blank:
    def normalize(self, url: str) -> str:
        return ""


def test_a_normalizer_that_fails_leaves_the_url_as_it_was_and_is_counted():
    class Stats(dict):
        def inc_value(self, key, count=1):
            self[key] = self.get(key, 0) + count

    stats = Stats()
    normalizing = Normalizing(UrlNormalizerChain([Broken(), Blank(), BasicNormalizer()]), stats)
    assert normalizing("HTTP://E.TEST/a") == "http://e.test/a"
    assert normalizing("HTTP://E.TEST/b") == "http://e.test/b"
    assert stats == {"urlnorm/failed/Broken": 2, "urlnorm/failed/Blank": 2,
                     "urlnorm/changed/Basic": 2}  # fmt: skip


@pytest.mark.parametrize(
    ("setting", "value", "says"),
    [
        ("URL_NORMALIZERS", {"no.such.Normalizer": 100}, "cannot be loaded"),
        ("URL_NORMALIZERS", {"tests.test_urlnorm.project_settings": 100}, "no normalize"),
        ("URL_NORMALIZERS", {"tests.test_urlnorm.Broken": "first"}, "whole number"),
        ("URL_HOST_RULES", {"shop.test": {"rewrite": [["(unclosed", "/"]]}}, "does not compile"),
        ("URL_HOST_RULES", {"shop.test": {"rewrite": [["/a", r"\2"]]}}, "does not compile"),
        ("URL_HOST_RULES", {"shop.test": {"keep": ["id"]}}, "'drop' and/or 'rewrite'"),
        ("URL_HOST_RULES", {"Shop.test": {"drop": ["a"]}}, "lower-case"),
        ("URL_DROP_PARAMETERS", ["ref", ""], "parameter names"),
    ],
)
def test_a_bad_normalizer_setting_is_refused_at_start_saying_why(setting, value, says):
    with pytest.raises(ConfigError, match=setting) as raised:
        config.check(project_settings(**{setting: value}))
    assert says in str(raised.value)
