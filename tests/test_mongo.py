"""The MongoDB item store against a MongoDB-wire server (nx-27017, or TEST_MONGO_URI)."""

import json
import logging

import pytest

from extensions.pipelines.mongo import MongoStore
from tests.helpers import restart, wait_for


def docs(n: int, start: int = 0, **extra):
    return [{"url": f"http://shop/p/{i}", "n": i, **extra} for i in range(start, start + n)]


def test_bulk_upsert_is_idempotent_and_keeps_first_seen(make_store, mongo_db):
    _, _, db = mongo_db
    store = make_store(node_id="n1")
    report = store.write(docs(300, price=1))
    assert report.written == 300
    first = db.items.find_one({"url": "http://shop/p/7"})

    report = store.write(docs(300, price=2))
    assert report.written == 300
    assert db.items.count_documents({}) == 300
    again = db.items.find_one({"url": "http://shop/p/7"})
    assert again["price"] == 2
    assert again["_first_seen"] == first["_first_seen"]
    # (nx-27017 hands a $set datetime back as a string, so compare as text)
    assert str(again["_updated_at"]) != str(first["_updated_at"])
    assert "_fetched_at" in again


def test_changed_at_moves_only_when_an_items_fields_change(make_store, mongo_db):
    _, _, db = mongo_db
    store = make_store(node_id="n1")
    store.write(docs(4, price=1))
    first = {d["url"]: str(d["_changed_at"]) for d in db.items.find()}
    assert len(first) == 4  # a new document has changed at its first write

    # the same fields fetched again (another node, a later fetch time): no change
    report = store.write(docs(4, price=1, _node="n2", _fetched_at="later"))
    assert report.changed == 0
    assert {d["url"]: str(d["_changed_at"]) for d in db.items.find()} == first

    # two prices change, in a batch where one page appears with its old price too
    changed = docs(2, price=2) + docs(1, start=3, price=1)
    report = store.write(changed)
    assert report.changed == 2
    after = {d["url"]: str(d["_changed_at"]) for d in db.items.find()}
    moved = {url for url in after if after[url] != first[url]}
    assert moved == {"http://shop/p/0", "http://shop/p/1"}
    assert db.items.find_one({"url": "http://shop/p/0"})["price"] == 2

    # an item's own _changed_at or hash is not taken: the store keeps them
    store.write([{"url": "http://shop/p/3", "n": 3, "price": 1, "_changed_at": "forged",
                  "_content_hash": "forged"}])  # fmt: skip
    kept = db.items.find_one({"url": "http://shop/p/3"})
    assert str(kept["_changed_at"]) == first["http://shop/p/3"]
    assert kept["_content_hash"] != "forged"


def test_two_nodes_writing_the_same_pages_leave_one_document_each(make_store, mongo_db):
    _, _, db = mongo_db
    one, two = make_store(node_id="n1"), make_store(node_id="n2")
    one.write(docs(50, _node="n1"))
    two.write(docs(50, start=25, _node="n2"))
    assert db.items.count_documents({}) == 75
    assert len(db.items.distinct("url")) == 75


def test_indexes_on_the_key_and_the_fetch_time(make_store, mongo_db):
    _, _, db = mongo_db
    make_store()
    indexes = db.items.index_information().values()
    keys = {tuple(k for k, _ in index["key"]): index.get("unique", False) for index in indexes}
    assert keys[("url",)] is True
    assert ("_fetched_at",) in keys


def test_items_mongodb_cannot_take_are_kept_aside_and_the_batch_goes_in(
    make_store, mongo_db, tmp_path
):
    _, _, db = mongo_db
    store = make_store()
    bad = [
        {"title": "no url"},
        {"url": "http://shop/set", "tags": {"a", "b"}},
        {"url": "http://shop/huge", "body": "x" * (17 * 1024 * 1024)},
    ]
    batch = docs(3) + bad
    report = store.write(batch)
    assert report.written == 3
    assert report.rejected == 3
    assert {ident for ident, _ in report.rejections} == {id(doc) for doc in bad}
    assert db.items.count_documents({}) == 3
    kept = [json.loads(line) for line in (tmp_path / "journal" / "rejected.jsonl").open()]
    reasons = " | ".join(record["reason"] for record in kept)
    assert "missing its key field 'url'" in reasons
    assert "not encodable as BSON" in reasons
    assert "16 MB" in reasons
    assert {record["item"].get("url") for record in kept} >= {"http://shop/set", None}


def test_insert_mode_relies_on_the_unique_index(make_store, mongo_db):
    _, _, db = mongo_db
    store = make_store(mode="insert")
    assert store.write(docs(20)).written == 20
    report = store.write(docs(30))
    assert (report.written, report.duplicates) == (10, 20)
    assert db.items.count_documents({}) == 30


def test_index_failure_is_one_clear_message(mongo_db, make_store, caplog):
    _, _, db = mongo_db
    db.items.insert_many([{"url": "http://shop/dup"}, {"url": "http://shop/dup"}])
    with caplog.at_level(logging.ERROR, logger="extensions.pipelines.mongo"):
        store = make_store()
    (message,) = [r.getMessage() for r in caplog.records]
    assert f"cannot create the unique index on {db.name}.items.url" in message
    assert "duplicates" in message
    assert store.write(docs(2)).written == 2  # writing goes on


def test_outage_spills_to_the_journal_and_replays_when_back(own_mongo, tmp_path):
    import pymongo

    uri = own_mongo["service"].url
    store = MongoStore(uri, "crawl", "items", journal_dir=tmp_path / "journal", retry_time=1.0,
                       server_selection_timeout=0.5)  # fmt: skip
    store.open()
    assert store.write(docs(10)).written == 10

    own_mongo["service"].stop()
    report = store.write(docs(10, start=10))
    assert (report.written, report.spilled) == (0, 10)
    assert store.write(docs(5, start=20)).spilled == 5  # straight to the journal now
    assert len(store.journal.pending()) == 2

    restart(own_mongo, tmp_path)
    # back once it answers the store (on a busy machine, not at its first ping)
    wait_for(store._answers, 30, "MongoDB answering again")
    report = store.write(docs(5, start=25))
    assert report.written == 5
    assert report.replayed == 15
    assert store.journal.pending() == []
    store.close()
    client = pymongo.MongoClient(uri)
    assert client.crawl.items.count_documents({}) == 30
    client.close()


def test_journal_left_at_close_is_replayed_at_the_next_start(own_mongo, tmp_path):
    import pymongo

    uri = own_mongo["service"].url
    kwargs = {"journal_dir": tmp_path / "journal", "retry_time": 0.5,
              "server_selection_timeout": 0.5}  # fmt: skip
    store = MongoStore(uri, "crawl", "items", **kwargs)
    store.open()
    own_mongo["service"].stop()
    assert store.write(docs(7)).spilled == 7
    store.close()

    restart(own_mongo, tmp_path)
    again = MongoStore(uri, "crawl", "items", **kwargs)
    assert again.open().replayed == 7
    again.close()
    client = pymongo.MongoClient(uri)
    assert client.crawl.items.count_documents({}) == 7
    client.close()


def test_a_crawl_ending_once_mongodb_is_back_replays_the_journal_at_close(own_mongo, tmp_path):
    import pymongo

    uri = own_mongo["service"].url
    store = MongoStore(uri, "crawl", "items", journal_dir=tmp_path / "journal", retry_time=0.5,
                       server_selection_timeout=0.5)  # fmt: skip
    store.open()
    own_mongo["service"].stop()
    assert store.write(docs(6)).spilled == 6  # the crawl's last items, in the outage
    restart(own_mongo, tmp_path)
    wait_for(store._answers, 30, "MongoDB answering again")
    assert store.close().replayed == 6  # no write came after: close asks
    assert store.journal.pending() == []
    client = pymongo.MongoClient(uri)
    assert client.crawl.items.count_documents({}) == 6
    client.close()


def test_documents_mongodb_keeps_asking_to_write_again_pause_and_end_in_the_journal(
    make_store, mongo_db, tmp_path
):
    # A second unique index the items break: every upsert of the second document
    # answers "duplicate key", which the store takes for two nodes' contention and
    # writes again. It must pause between tries and stop at its retry time.
    _, _, db = mongo_db
    db.items.create_index("sku", unique=True)
    store = make_store(retry_time=1.0)
    report = store.write([{"url": "http://shop/a", "sku": 1}, {"url": "http://shop/b", "sku": 1}])
    assert 1 <= report.retried <= 10  # paused: 0.25 s, 0.5 s, then the 1 s deadline
    assert report.spilled == 2  # the batch went to the journal, for a later replay
    assert list((tmp_path / "journal").rglob("*.bson"))
    assert db.items.count_documents({"url": "http://shop/a"}) == 1


@pytest.mark.spawns
def test_a_node_starting_leaves_the_journal_files_a_live_node_replays_and_takes_a_dead_ones(
    tmp_path,
):
    """Two nodes of one machine share the journal: one starting puts back what a
    dead process was replaying, not what a live one is (whose release would fail)."""
    import subprocess
    import sys

    from extensions.pipelines.journal import Journal

    def claimed_by(name: str, pid: int | str):
        path = Journal(tmp_path, name).spill([{"url": f"http://shop/{name}"}])
        claim = path.with_name(f".{path.name}.replaying-{name}-{pid}")
        path.rename(claim)
        return path, claim

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, timeout=30, check=True)  # fmt: skip
    gone, _ = claimed_by("gone", dead.stdout.strip())
    held = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        _, busy = claimed_by("busy", held.pid)
        starting = Journal(tmp_path, "starting")
        starting.reclaim_abandoned()
        assert busy.exists()  # a live node's claim stays its own
        assert [p.name for p in starting.pending()] == [gone.name]  # the dead one's is back
    finally:
        held.kill()
        held.wait(10)
    starting.reclaim_abandoned()  # its process gone now: back too
    assert len(starting.pending()) == 2
    claim = starting.claim(starting.pending()[0])
    assert claim is not None
    starting.release(claim, done=True)
    starting.release(claim, done=True)  # gone already: no error
    assert len(starting.pending()) == 1
