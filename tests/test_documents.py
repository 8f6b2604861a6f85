"""Items a store must not take as they are: rejected with the reason, kept, the
rest of their batch written."""

import dataclasses
import json

import pytest
import scrapy
from itemadapter import ItemAdapter

from extensions.pipelines.documents import MAX_NESTING, document_problem
from extensions.pipelines.itemstore import _flat_copy
from extensions.pipelines.stores import JsonLinesStore


def deep(levels: int) -> dict:
    root = cur = {}
    for _ in range(levels):
        cur["a"] = {}
        cur = cur["a"]
    return root


def test_what_mongodb_would_reinterpret_or_refuse():
    assert document_problem({"url": "u", "x": 1}, "url") is None
    assert "key field" in document_problem({"url": {"$gt": ""}}, "url")
    assert "key field" in document_problem({"url": ["a"]}, "url")
    assert "missing" in document_problem({"x": 1}, "url")
    assert "'.'" in document_problem({"url": "u", "a.b": 1}, "url")
    assert "'$'" in document_problem({"url": "u", "n": [{"$set": 1}]}, "url")
    assert "nested" in document_problem({"url": "u", "d": deep(5000)}, "url")
    assert document_problem({"url": "u", "d": deep(MAX_NESTING - 2)}, "url") is None
    # a JSON Lines file takes any field name, but not endless nesting
    assert document_problem({"a.b": 1}, mongo_names=False) is None
    assert document_problem({"d": deep(5000)}, mongo_names=False)


def test_mongo_store_rejects_and_keeps_them(make_store, mongo_db, tmp_path):
    store = make_store()
    batch = [
        {"url": "http://shop/ok", "n": 1},
        {"url": {"$gt": ""}, "n": 2},
        {"url": "http://shop/dotted", "a.b": 3},
        {"url": "http://shop/deep", "d": deep(5000)},
    ]
    report = store.write(batch)
    assert report.written == 1 and report.rejected == 3
    _, _, db = mongo_db
    assert [d["url"] for d in db["items"].find({}, {"url": 1})] == ["http://shop/ok"]
    kept = [json.loads(line) for line in store.rejected_path.read_text().splitlines()]
    assert len(kept) == 3
    assert {k["item"]["n"] for k in kept if "n" in k["item"]} == {2}
    assert all(k["reason"] for k in kept)


def test_json_lines_store_rejects_endless_nesting(tmp_path):
    store = JsonLinesStore(tmp_path, "spider", "node")
    store.open()
    report = store.write([{"url": "a", "d": deep(5000)}, {"url": "b", "a.b": 1}])
    store.close()
    assert report.written == 1 and report.rejected == 1
    lines = store.path.read_text().splitlines()
    assert [json.loads(line)["url"] for line in lines] == ["b"]
    assert "nested" in json.loads(store.rejected_path.read_text())["reason"]


class _Product(scrapy.Item):
    url = scrapy.Field()
    tags = scrapy.Field()


@dataclasses.dataclass
class _Page:
    url: str
    depth: int
    title: str | None = None


@pytest.mark.parametrize(
    "item",
    [
        {"url": "http://a/", "price": 1.5, "in_stock": True, "note": None},
        {"url": "http://a/", "nested": {"inner": _Product(url="http://b/")}},
        _Product(url="http://a/"),
        _Product(url="http://a/", tags=["x", {"y": 1}]),
        _Page(url="http://a/", depth=2),
        _Page(url="http://a/", depth=2, title=_Product(url="http://c/")),  # type: ignore[arg-type]
    ],
)
def test_the_stored_copy_of_an_item_is_itemadapters(item):
    # flat items are copied directly; nested ones go through itemadapter
    copy = _flat_copy(item)
    assert copy is None or copy == ItemAdapter(item).asdict()
    flat = all(type(v) in (str, int, float, bool, type(None)) for v in ItemAdapter(item).values())
    assert (copy is not None) == flat
