import collections
import datetime as dt
import decimal
import json

import pytest
from scrapy import FormRequest, Request, Spider

from extensions.exceptions import SerializationError
from extensions.frontier.serializer import dumps_request, loads_request


class ShopSpider(Spider):
    name = "shop"

    def parse_product(self, response):
        pass

    def on_error(self, failure):
        pass


@pytest.fixture
def spider():
    return ShopSpider()


def test_round_trip_keeps_every_field(spider):
    request = Request(
        "https://example.com/p?id=1",
        callback=spider.parse_product,
        errback=spider.on_error,
        method="POST",
        headers={"X-Token": "abc", "Accept": ["a", "b"]},
        body=b"\x00\xffbinary",
        cookies={"session": "1"},
        meta={"depth": 3, "tags": ["a", {"b": None}], "ratio": 0.5},
        priority=7,
        dont_filter=True,
        flags=["seed"],
        cb_kwargs={"page": 2},
    )
    data = dumps_request(request, spider)
    back = loads_request(data, spider)
    assert back.url == request.url
    assert back.callback == spider.parse_product
    assert back.errback == spider.on_error
    assert back.method == "POST"
    assert back.headers.getlist("Accept") == [b"a", b"b"]
    assert back.headers["X-Token"] == b"abc"
    assert back.body == b"\x00\xffbinary"
    assert back.cookies == {"session": "1"}
    assert back.meta == request.meta
    assert back.priority == 7
    assert back.dont_filter is True
    assert back.flags == ["seed"]
    assert back.cb_kwargs == {"page": 2}


def test_it_is_json_and_leaves_defaults_out(spider):
    data = dumps_request(Request("https://example.com/"), spider)
    assert json.loads(data) == {"url": "https://example.com/"}


def test_request_subclass_survives(spider):
    request = FormRequest("https://example.com/login", formdata={"user": "me"})
    back = loads_request(dumps_request(request, spider), spider)
    assert type(back) is FormRequest
    assert back.body == b"user=me"


def test_unencodable_meta_is_refused_naming_the_key(spider):
    request = Request("https://example.com/", meta={"ok": 1, "handle": object()})
    with pytest.raises(SerializationError) as error:
        dumps_request(request, spider)
    message = str(error.value)
    assert "request.meta['handle']" in message
    assert "object" in message


def test_a_nested_object_is_refused_naming_where_it_sits(spider):
    request = Request("https://example.com/", cb_kwargs={"ids": [1, (2, {"x": object()})]})
    with pytest.raises(SerializationError, match=r"cb_kwargs\['ids'\]\[1\]\[1\]\['x'\]"):
        dumps_request(request, spider)


INERT = {
    "pair": (1, "a", (2,)),
    "ids": {1, 2},
    "tags": frozenset({"x"}),
    "seen": dt.datetime(2026, 12, 1, 10, 0, tzinfo=dt.UTC),
    "local": dt.datetime(2026, 1, 1, 1, 1, 1, 5),
    "day": dt.date(2026, 1, 2),
    "at": dt.time(3, 4, 5),
    "wait": dt.timedelta(days=1, seconds=3, microseconds=7),
    "price": decimal.Decimal("1.10"),
    "ordered": collections.OrderedDict([("b", 1), ("a", 2)]),
    "by_number": {1: "a", (1, 2): "b"},
    "looks_tagged": {"$tuple": 5},
    "raw": b"\x00\xff",
    "plain": [1, {"x": None}],
}


def test_inert_values_come_back_as_the_same_types(spider):
    """What Scrapy requests carry in practice: the request read back has them as
    they were, each of its own type, in meta and cb_kwargs alike."""
    request = Request("https://example.com/", meta=INERT, cb_kwargs={"inert": INERT})
    back = loads_request(dumps_request(request, spider), spider)
    for meta in (back.meta, back.cb_kwargs["inert"]):
        assert meta == INERT
        assert {k: type(v) for k, v in meta.items()} == {k: type(v) for k, v in INERT.items()}
    assert list(back.meta["ordered"]) == ["b", "a"]
    assert type(back.meta["pair"][2]) is tuple


def test_a_str_subclass_is_stored_as_str(spider):
    from scrapy.http import HtmlResponse
    from scrapy.linkextractors import LinkExtractor

    page = HtmlResponse("https://example.com/", body=b"<a href='/x'>Next <b>page</b></a>")
    [link] = LinkExtractor().extract_links(page)
    assert type(link.text) is not str  # lxml's smart string
    back = loads_request(dumps_request(Request(link.url, meta={"link_text": link.text})))
    assert back.meta["link_text"] == "Next page"
    assert type(back.meta["link_text"]) is str


@pytest.mark.parametrize(
    "value",
    [
        {"$tuple": 5},
        {"$datetime": "yesterday"},
        {"$decimal": "1.2.3"},
        {"$bytes": "not base64!"},
        {"$timedelta": [1, 2]},
        {"$dict": [[[1], "an unhashable key"]]},
        {"$dict": [["a"]]},
        {"$set": [[1]]},
        {"$datetime": "2026-01-01" + "0" * 100},
    ],
)
def test_a_malformed_tagged_value_is_refused_on_load(spider, value):
    data = json.dumps({"url": "https://example.com/", "meta": {"x": value}})
    with pytest.raises(SerializationError, match="meta holds a value that cannot be read"):
        loads_request(data, spider)


class AliasingSpider(ShopSpider):
    name = "aliasing"
    parse_item = ShopSpider.parse_product  # one method under a second name

    def on_error(self, failure):  # overrides the parent's
        pass


@pytest.mark.parametrize(
    "make",
    [
        lambda s: Request("https://example.com/", callback=s.parse_product, errback=s.on_error),
        lambda s: Request("https://example.com/", callback=s.parse_item),
        lambda s: FormRequest("https://example.com/", formdata={"a": "1"}, callback=s.parse),
        # a method of another spider of the same class: Scrapy names it all the same
        lambda s: Request("https://example.com/", callback=AliasingSpider().parse_product),
    ],
)
def test_callbacks_are_named_for_the_methods_scrapy_finds(make):
    spider = AliasingSpider()
    request = make(spider)
    stored = json.loads(dumps_request(request, spider))
    scrapy_own = request.to_dict(spider=spider)

    def method(name):
        return getattr(spider, name).__func__ if name else None

    for field in ("callback", "errback"):
        # (of two names for one method, either may be stored: both call it)
        assert method(stored.get(field)) is method(scrapy_own[field])
    back = loads_request(json.dumps(stored), spider)
    assert back.callback.__func__ is request.callback.__func__
    assert back.errback == request.errback


def test_callback_that_is_not_a_spider_method_is_refused(spider):
    request = Request("https://example.com/", callback=lambda response: None)
    with pytest.raises(SerializationError):
        dumps_request(request, spider)


@pytest.mark.parametrize(
    "data",
    [b"garbage", b"[1, 2]", b'{"no_url": 1}', b"\xff\xfe", b'{"url": 5}'],
)
def test_garbage_is_refused_on_load(spider, data):
    with pytest.raises(SerializationError):
        loads_request(data, spider)


def test_unknown_callback_is_refused_on_load(spider):
    with pytest.raises(SerializationError, match="nope"):
        loads_request(b'{"url": "https://example.com/", "callback": "nope"}', spider)


def test_class_path_cannot_import_new_code(spider):
    """Data in Redis must never make a node import a module of its choosing."""
    import sys

    data = json.dumps({"url": "https://example.com/", "_class": "antigravity.Request"})
    with pytest.raises(SerializationError, match="unknown request class"):
        loads_request(data, spider)
    assert "antigravity" not in sys.modules
    data = json.dumps({"url": "https://example.com/", "_class": "os.system"})
    with pytest.raises(SerializationError):
        loads_request(data, spider)


def test_callbacks_resolve_only_to_public_spider_methods():
    from scrapy.spiders import CrawlSpider

    from extensions.frontier.serializer import callback_problem
    from tests.spiders import ScrapyRedisStyleSpider

    spider = ScrapyRedisStyleSpider()
    assert callback_problem(spider, "parse") is None
    for name in ("_private", "__init__", "_set_crawler", "start_requests", "from_crawler",
                 "make_request_from_data", "next_requests", "close", "nope", "a.b", 5):  # fmt: skip
        assert callback_problem(spider, name), name

    class Rules(CrawlSpider):
        name = "rules"

    # CrawlSpider's own rule callbacks are private methods, and allowed there only
    assert callback_problem(Rules(), "_callback") is None
    assert callback_problem(spider, "_callback")


def test_a_spider_that_names_a_private_callback_is_told_when_queueing():
    from tests.spiders import ScrapyRedisStyleSpider

    spider = ScrapyRedisStyleSpider()
    with pytest.raises(SerializationError, match="private"):
        dumps_request(Request("http://example.com/", callback=spider._private), spider)
