"""Redis ran a node's command and its answer never came (a read that timed out,
a server that went away after it ran): the node in-process on a real Redis, its
commands sent through a proxy that answers late (servers/latency_proxy.py) or to
a port nobody listens on. Nothing is lost, nothing is written twice."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator

import pytest
import redis

from extensions.frontier.frontier import Frontier
from servers import services
from servers.clients import redis_at
from tests.test_frontier import entry
from tests.test_scheduler_unit import open_scheduler, stop_loops


@pytest.fixture
def scheduler(redis_url):
    opened = open_scheduler(redis_url)
    yield opened
    stop_loops(opened)


@contextlib.contextmanager
def answers_lost(node, redis_url: str) -> Iterator[None]:
    """The node's commands reach Redis and run; their answers come a second
    late, to a client that waits 0.3 s."""
    proxy = services.start_latency_proxy(redis_url, delay_ms=1000)
    slow = redis_at(proxy.url)
    slow.ping()  # connected, its handshake answered; then the short timeout
    connection = slow.connection_pool.get_connection()
    connection.socket_timeout = 0.3
    connection._sock.settimeout(0.3)
    connection._parser._buffer.socket_timeout = 0.3
    slow.connection_pool.release(connection)
    server = node.frontier.server
    try:
        node.frontier.server = slow
        yield
    finally:
        node.frontier.server = server
        slow.close()
        proxy.stop()


@contextlib.contextmanager
def redis_away(node) -> Iterator[None]:
    """The node's commands go to a port nobody listens on: none runs."""
    server = node.frontier.server
    node.frontier.server = redis.Redis(port=services.free_port(), socket_connect_timeout=1)
    try:
        yield
    finally:
        node.frontier.server.close()
        node.frontier.server = server


def owe_a_flush(node, url: str) -> None:
    """A request with no fingerprint to queue (queued twice if written twice)
    and two finished ones to count."""
    node.pending.enqueue.append(("", "lost.test", 0, json.dumps({"url": url}).encode()))
    node.pending.done += 2


def queued_urls(redis_client) -> list[str]:
    return [json.loads(raw)["url"] for raw in redis_client.hvals("unit:data:lost.test")]


def done(redis_client) -> int:
    return int(redis_client.hget("unit:checkpoint", "done") or 0)


def test_a_flush_whose_answer_was_lost_is_not_written_again(scheduler, redis_client, redis_url):
    node = scheduler.node
    owe_a_flush(node, "http://lost.test/1")
    with answers_lost(node, redis_url):
        assert node.flush() is None
    assert queued_urls(redis_client) == ["http://lost.test/1"] and done(redis_client) == 2

    owe_a_flush(node, "http://lost.test/2")  # what came since is written after it
    node.flush()  # its mark is in Redis: it went in
    assert sorted(queued_urls(redis_client)) == ["http://lost.test/1", "http://lost.test/2"]
    assert done(redis_client) == 4
    assert node.pending.unsure is None and not node.pending.unwritten()
    assert node.stats.get_value("frontier/unsure_flushes/went_in") == 1


def test_a_flush_that_never_ran_is_written_once_redis_answers(scheduler, redis_client):
    node = scheduler.node
    owe_a_flush(node, "http://lost.test/1")
    with redis_away(node):
        assert node.flush() is None
        owe_a_flush(node, "http://lost.test/2")
        assert node.flush() is None  # its mark cannot be read: nothing is written
    assert queued_urls(redis_client) == [] and done(redis_client) == 0

    node.flush()  # no mark: it did not go in, and goes now, with what came since
    assert sorted(queued_urls(redis_client)) == ["http://lost.test/1", "http://lost.test/2"]
    assert done(redis_client) == 4
    assert node.stats.get_value("frontier/unsure_flushes/written_again") == 1
    node.flush()
    assert len(queued_urls(redis_client)) == 2 and done(redis_client) == 4


def test_leases_whose_answer_was_lost_go_back_at_the_nodes_next_beat(
    scheduler, redis_client, redis_url
):
    """A lease ran in Redis and its answer never reached the node (a timeout, a
    server that shut down after the command): the live node gives back the leases
    it holds without knowing, and none it knows of."""
    node = scheduler.node
    node.polling.look_again_now()
    assert scheduler.next_request() is None  # (the lease script is loaded in Redis)
    writer = Frontier(redis_client, node.keys, "writer")
    writer.enqueue([entry("http://known.test/0")])
    node.polling.look_again_now()
    known = scheduler.next_request()
    assert known is not None and known.url == "http://known.test/0"
    writer.enqueue([entry(f"http://lost.test/{i}") for i in range(3)])

    with answers_lost(node, redis_url):
        node.polling.look_again_now()
        assert scheduler.next_request() is None  # the lease ran; its answer did not come
    leases = redis_client.zrange("unit:leases:unit-node", 0, -1)
    assert len(leases) == 4  # the three lost and the one the node knows

    node.duties.heartbeat()
    assert redis_client.zrange("unit:leases:unit-node", 0, -1) == [node.leased[known]]
    assert node.stats.get_value("frontier/lost_leases_given_back") == 3
    node.polling.look_again_now()
    again = [scheduler.next_request() for _ in range(3)]
    assert sorted(r.url for r in again if r) == [f"http://lost.test/{i}" for i in range(3)]
    node.duties.heartbeat()  # nothing more to give back: the node holds them now
    assert node.stats.get_value("frontier/lost_leases_given_back") == 3
    assert redis_client.zcard("unit:leases:unit-node") == 4


def long_back_off(node) -> None:
    """The node's back-off at its longest (FRONTIER_IDLE_POLL_MAX, a second):
    longer than the test takes to ask again, however loaded the machine."""
    for _ in range(8):
        node.polling.back_off(time.monotonic(), None)
    assert not node.polling.due(time.monotonic())


def test_while_redis_is_away_what_a_node_found_waits_for_its_back_off(scheduler):
    node = scheduler.node
    with redis_away(node):
        owe_a_flush(node, "http://lost.test/1")
        node.polling.look_again_now()
        assert scheduler.next_request() is None  # the write fails: the node backs off
        errors = node.stats.get_value("redis/errors")
        assert errors and node.health.is_down
        long_back_off(node)
        owe_a_flush(node, "http://lost.test/2")
        assert scheduler.next_request() is None
        # no second call on the reactor before the back-off is over
        assert node.stats.get_value("redis/errors") == errors
