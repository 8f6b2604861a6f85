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


def test_nested_set_is_refused(spider):
    request = Request("https://example.com/", cb_kwargs={"ids": [1, {2, 3}]})
    with pytest.raises(SerializationError, match=r"cb_kwargs\['ids'\]\[1\]"):
        dumps_request(request, spider)


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
