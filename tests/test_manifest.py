"""The crawl's manifest (NAME:frontier 'pieces'): the parts' Lua pieces that
fill the core scripts' hook slots. A project's part adds a piece and the core
scripts run it, with no edit to them; every node runs what the manifest names;
what another writer left there is read as hostile. Real schedulers on a real
Redis, in-process."""

from __future__ import annotations

import logging

import pytest
from scrapy import Request

from extensions.frontier.frontier import Frontier
from extensions.frontier.manifest import Manifest, ManifestError, bundled
from extensions.frontier.part import FrontierPart
from extensions.keys import SpiderKeys
from tests.test_scheduler_unit import open_scheduler, stop_loops

FIRST = "tests.test_manifest.FirstHostsPart"
PIECE = "tests.pieces:_first_hosts"
OVERFLOW = "extensions.frontier.overflow:_overflow"
RANKS = "extensions.frontier.ranks:_ranks"


class FirstHostsPart(FrontierPart):
    """A project's part whose piece puts the hosts of NAME:first_hosts first."""

    lua_pieces = (PIECE,)


class MissingPiecePart(FrontierPart):
    lua_pieces = ("tests.pieces:_not_there",)


def leased_urls(scheduler, count: int) -> list[str]:
    urls = []
    for _ in range(count):
        request = scheduler.next_request()
        assert request is not None
        urls.append(request.url)
    return urls


def enqueue_hosts(scheduler) -> None:
    for url in ("http://early.test/", "http://late.test/"):
        assert scheduler.enqueue_request(Request(url))
    scheduler.node.flush()


def test_a_projects_part_adds_a_piece_and_the_core_scripts_run_it(redis_url, redis_client):
    scheduler = open_scheduler(redis_url, FRONTIER_PARTS={FIRST: 600})
    try:
        assert PIECE in redis_client.hget("unit:frontier", "pieces").decode().split(",")
        redis_client.sadd("unit:first_hosts", "late.test")
        enqueue_hosts(scheduler)
        # found second, leased first: the piece's ready score, in the core's settle
        assert leased_urls(scheduler, 2) == ["http://late.test/", "http://early.test/"]
        # the node's other readers of the manifest (the link graph's ranks, a
        # stopped crawl's drain) run the crawl's scripts with the piece too
        assert PIECE in Manifest(redis_client, SpiderKeys.for_spider("unit")).pieces
    finally:
        stop_loops(scheduler)


def test_without_the_part_its_piece_is_not_run(redis_url, redis_client):
    scheduler = open_scheduler(redis_url)
    try:
        assert PIECE not in redis_client.hget("unit:frontier", "pieces").decode()
        redis_client.sadd("unit:first_hosts", "late.test")
        enqueue_hosts(scheduler)
        assert leased_urls(scheduler, 2) == ["http://early.test/", "http://late.test/"]
    finally:
        stop_loops(scheduler)


def test_a_crawl_carries_only_the_pieces_its_parts_need(redis_url, redis_client):
    # no overflow, no ordering by importance nor budget by rank: no pieces at all
    scheduler = open_scheduler(redis_url)
    try:
        assert redis_client.hget("unit:frontier", "pieces") == b""
        assert scheduler.node.frontier.manifest.pieces == ()
    finally:
        stop_loops(scheduler)
    scheduler = open_scheduler(redis_url, FRONTIER_ORDER="importance")
    try:
        assert redis_client.hget("unit:frontier", "pieces") == RANKS.encode()
    finally:
        stop_loops(scheduler)


def test_the_manifest_is_the_union_of_the_nodes_and_each_node_reads_it_again(
    redis_url, redis_client
):
    scheduler = open_scheduler(redis_url)
    try:
        manifest = scheduler.node.frontier.manifest
        assert manifest.pieces == ()
        lease_before = manifest.script("lease")
        # another node of the crawl brings the overflow's piece
        other = Manifest(redis_client, SpiderKeys.for_spider("unit"))
        assert other.join([OVERFLOW]) == (OVERFLOW,)
        assert manifest.refresh()
        assert manifest.pieces == (OVERFLOW,)
        assert manifest.script("lease").sha != lease_before.sha
        # and one that brings nothing takes nothing away
        assert Manifest(redis_client, SpiderKeys.for_spider("unit")).join([]) == (OVERFLOW,)
        assert manifest.script("frontier").sha == manifest.script("frontier").sha
    finally:
        stop_loops(scheduler)


def test_before_any_node_wrote_one_every_bundled_piece_runs(redis_client):
    frontier = Frontier(redis_client, SpiderKeys.for_spider("fresh"), "")
    assert frontier.manifest.pieces == bundled()
    assert set(bundled()) >= {OVERFLOW, RANKS}
    assert not redis_client.exists("fresh:frontier")  # reading writes nothing


def test_what_another_writer_left_in_the_manifest_is_left_out_or_refused(redis_client, caplog):
    keys = SpiderKeys.for_spider("hostile")
    redis_client.hset(keys.frontier, "pieces", "not a piece,../x:_y," + RANKS)
    stats: dict[str, int] = {}

    class Stats:
        def inc_value(self, key: str) -> None:
            stats[key] = stats.get(key, 0) + 1

    with caplog.at_level(logging.WARNING, "extensions.frontier.manifest"):
        manifest = Manifest(redis_client, keys, stats=Stats())
        assert manifest.pieces == (RANKS,)
    assert stats == {"frontier/manifest/malformed": 2}
    assert "no piece: left out" in caplog.text

    # a well-formed name no part of this node declares: it cannot run the
    # crawl's scripts, and says which part it lacks
    redis_client.hset(keys.frontier, "pieces", "someproject.parts:_secret")
    with pytest.raises(ManifestError, match=r"someproject\.parts:_secret.*FRONTIER_PARTS"):
        Manifest(redis_client, keys).join([])
    # a node already running goes on with the pieces it has, and says why
    caplog.clear()
    with caplog.at_level(logging.ERROR, "extensions.frontier.manifest"):
        assert not manifest.refresh()
    assert manifest.pieces == (RANKS,)
    assert "someproject.parts:_secret" in caplog.text


def test_a_node_whose_crawl_needs_a_piece_it_lacks_does_not_start(redis_url, redis_client):
    redis_client.hset("unit:frontier", "pieces", "someproject.parts:_secret")
    with pytest.raises(ManifestError, match="FRONTIER_PARTS"):
        open_scheduler(redis_url)


def test_a_part_that_names_a_piece_that_is_not_there_is_refused_at_start(redis_url):
    with pytest.raises(ValueError, match=r"no Lua script tests\.pieces:_not_there"):
        open_scheduler(redis_url, FRONTIER_PARTS={"tests.test_manifest.MissingPiecePart": 600})
