"""Query parameters learned per host, against a real Redis: pairs of fetched
URLs that differ only in one parameter, with equal content, make it learned;
one pair that differs undoes it for good; every node's normalizer hears it."""

from __future__ import annotations

import pytest

from extensions.frontier.params import (
    PAIRS_KEPT,
    LearnedParametersNormalizer,
    ParameterLearning,
    evidence_items,
)
from extensions.keys import SpiderKeys

SAME = b"A" * 10  # one page's content digest
OTHER = b"B" * 10


@pytest.fixture
def keys():
    return SpiderKeys.for_spider("t")


def normalizer(redis_client, keys) -> LearnedParametersNormalizer:
    reader = LearnedParametersNormalizer(needed=3)
    reader.server, reader.keys = redis_client, keys
    return reader


@pytest.mark.unit
def test_a_url_gives_one_pair_per_parameter_named_once():
    own, items = evidence_items("http://s.test/list?page=2&sort=price&page=3&=x&b")
    names = items[1::3]
    assert names == ["sort", "b"]  # page twice, and a pair without a name: no evidence
    assert evidence_items("http://s.test/list") is None
    assert evidence_items("http://s.test/list?") is None
    assert len(own) == 8


def test_a_parameter_that_never_changes_a_page_is_learned_and_every_node_drops_it(
    redis_client, keys
):
    learning = ParameterLearning(redis_client, keys, needed=3)
    reader = normalizer(redis_client, keys)
    reader.load()
    url = "http://s.test/list?page=2&sort={}"
    assert learning.learn(url.format("price"), SAME)["learned"] == []
    assert learning.learn(url.format("name"), SAME)["learned"] == []  # one pair
    assert learning.learn("http://s.test/list?page=2", SAME)["learned"] == []
    assert redis_client.hget(keys.params("s.test"), "sort") == b"1"
    assert reader.poll() == 0  # nothing learned yet: every node keeps sort
    assert reader.normalize(url.format("x")) == url.format("x")
    # another value: a pair with the last, and one with the page without sort
    assert learning.learn(url.format("date"), SAME)["learned"] == ["sort"]
    assert reader.poll() == 1
    assert reader.normalize("http://s.test/list?sort=x&page=9") == "http://s.test/list?page=9"
    assert reader.normalize("http://other.test/list?sort=x") == "http://other.test/list?sort=x"
    # a node that opens later reads every decision at once
    late = normalizer(redis_client, keys)
    late.load()
    assert late.normalize("http://s.test/?sort=x") == "http://s.test/"


def test_one_pair_that_differs_keeps_a_parameter_for_good(redis_client, keys):
    learning = ParameterLearning(redis_client, keys, needed=2)
    reader = normalizer(redis_client, keys)
    reader.needed = 2
    url = "http://s.test/list?page={}"
    learning.learn(url.format(1), SAME)
    learning.learn(url.format(2), OTHER)  # page changes the content
    assert redis_client.hget(keys.params("s.test"), "page") == b"-1"
    for n in range(3, 10):
        learning.learn(url.format(n), OTHER)  # equal pairs now: too late
    assert redis_client.hget(keys.params("s.test"), "page") == b"-1"
    reader.load()
    assert reader.normalize(url.format(4)) == url.format(4)


def test_a_learned_parameter_is_undone_when_a_pair_differs(redis_client, keys):
    learning = ParameterLearning(redis_client, keys, needed=2)
    reader = normalizer(redis_client, keys)
    reader.needed = 2
    reader.load()
    url = "http://s.test/item?id=7&view={}"
    for view in ("grid", "list", "table"):
        learning.learn(url.format(view), SAME)
    assert reader.poll() == 1 and reader.normalize(url.format("x")) == "http://s.test/item?id=7"
    assert learning.learn(url.format("print"), OTHER)["undone"] == ["view"]
    assert reader.poll() == 1 and reader.normalize(url.format("x")) == url.format("x")


def test_the_same_url_fetched_again_is_no_evidence(redis_client, keys):
    learning = ParameterLearning(redis_client, keys, needed=2)
    learning.learn("http://s.test/a?x=1", SAME)
    learning.learn("http://s.test/a", SAME)
    for _ in range(3):
        learning.learn("http://s.test/a?x=1", SAME)  # retries, recrawls
    assert redis_client.hget(keys.params("s.test"), "x") is None


def test_the_evidence_a_host_keeps_is_bounded_and_expires(redis_client, keys):
    learning = ParameterLearning(redis_client, keys, needed=3)
    for n in range(PAIRS_KEPT * 3):
        learning.learn(f"http://s.test/p{n}?a={n}&b={n}", bytes([n % 256]) * 10)
    pairs = keys.params("s.test") + ":pairs"
    assert redis_client.hlen(pairs) <= PAIRS_KEPT
    assert 0 < redis_client.pttl(pairs) <= 3_600_000


def test_a_malformed_decision_is_reset_and_counted(redis_client, keys):
    learning = ParameterLearning(redis_client, keys, needed=2)
    redis_client.hset(keys.params("s.test"), "sort", "lots")
    learning.learn("http://s.test/l?sort=a", SAME)
    assert learning.learn("http://s.test/l?sort=b", SAME)["bad"] == 1
    assert redis_client.hget(keys.params("s.test"), "sort") == b"1"
    # a stream entry another writer left is skipped
    redis_client.xadd(keys.params_learned, {"x": "y"})
    reader = normalizer(redis_client, keys)
    reader.poll()
    assert reader.by_host == {}
