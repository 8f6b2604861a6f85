"""Nodes killed with -9 and Redis restarted mid-crawl: nothing lost, nothing doubled.

Slow tests (a crawl each): run them alone with ``pytest -m chaos``.
"""

import json
import random
import signal
import time

import pytest

from demosite import catalog
from demosite.flaky import FLAKY_PER_KIND, RETRY_AFTER
from servers import services
from servers.clients import redis_at
from tests.conftest import queued, read_items, site_hits
from tests.helpers import (
    ALLOW,
    HOPELESS,
    good_pages,
    page_hits,
    read_group,
    site_times,
    wait_for,
)
from tests.helpers import CHAOS_SETTINGS as SETTINGS

pytestmark = pytest.mark.chaos


@pytest.fixture
def slow_site():
    service = services.start_demo_site(latency=0.1)
    yield service
    service.stop()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_kill_9_of_any_node_loses_no_page_and_doubles_no_item(
    seed, redis_url, redis_client, mongo_db, slow_site, nodes
):
    rng = random.Random(seed)
    mongo_uri, database, db = mongo_db
    # two hosts (two names of this machine), one of them held to a cluster-wide rate
    flaky_host = slow_site.url.replace("127.0.0.1", "localhost")
    settings = {**SETTINGS, "MONGO_URI": mongo_uri, "MONGO_DATABASE": database,
                "ITEM_STORES": "mongo,stream",
                "CLUSTER_HOST_RATES": json.dumps({"localhost": 20})}  # fmt: skip
    redis_client.lpush("site:start_urls", slow_site.url + "/category/books", flaky_host + "/flaky/")
    for n in (1, 2, 3):
        nodes.start("site", redis_url, spider_args={"allow": ALLOW}, NODE_ID=f"n{n}", **settings)

    wait_for(lambda: sum(site_hits(slow_site).values()) >= 20, 60, "crawl start")
    time.sleep(rng.uniform(0, 1.5))
    victim_index = rng.randrange(3)
    victim = nodes.procs[victim_index]
    victim.send_signal(signal.SIGKILL)
    killed_at = time.time()
    victim.wait(10)
    held = redis_client.zcard(f"site:leases:n{victim_index + 1}")
    nodes.start("site", redis_url, spider_args={"allow": ALLOW}, NODE_ID="n4", **settings)

    codes = nodes.wait(180)
    assert codes.count(-signal.SIGKILL) == 1
    assert [c for c in codes if c != -signal.SIGKILL] == [0, 0, 0], nodes.tail()

    def path(url: str) -> str:
        return url.removeprefix(slow_site.url).removeprefix(flaky_host)

    stored = [path(doc["url"]) for doc in db["site"].find({}, {"url": 1})]
    assert len(stored) == len(set(stored)), "a page was stored twice"
    assert set(stored) == good_pages(), "pages lost or extra"
    # a consumer group reading the stream store sees each page once too
    streamed = [path(json.loads(e["item"])["url"]) for e in read_group(redis_client, "site:items")]
    assert sorted(streamed) == sorted(stored)

    letters = [json.loads(raw) for raw in redis_client.lrange("site:dlq", 0, -1)]
    assert {letter["url"] for letter in letters} == {flaky_host + page for page in HOPELESS}
    assert {letter["error"] for letter in letters} == {"HTTP 500"}

    times = site_times(slow_site)
    for n in range(1, FLAKY_PER_KIND + 1):
        first, second = times[f"/flaky/429/{n}"][:2]
        # A node killed between getting the 429 and writing its retry to Redis
        # loses that wait; its request is simply fetched again, which is fine.
        if not killed_at - 1 <= first <= killed_at:
            assert second - first >= RETRY_AFTER - 0.05
    if held:
        returned = f"returned {held} requests leased by node n{victim_index + 1}"
        assert any(returned in nodes.log(i) for i in range(4)), f"{held} leases never came back"
    assert redis_client.zcard("site:delayed") == 0


def test_redis_restart_mid_crawl_with_aof_loses_nothing(tmp_path, slow_site, nodes):
    port = services.free_port()
    redis_dir = tmp_path / "redis"
    server = services.start_redis(redis_dir, port, appendonly=True)
    try:
        client = redis_at(server.url)
        client.lpush(
            "site:start_urls", slow_site.url + "/category/books", slow_site.url + "/flaky/"
        )
        for _ in range(2):
            nodes.start("site", server.url, spider_args={"allow": ALLOW}, **SETTINGS)
        # both nodes in the crawl (a busy machine starts one later than the other)
        wait_for(lambda: client.zcard("site:nodes") == 2, 60, "both nodes joined")
        client.close()
        wait_for(lambda: sum(site_hits(slow_site).values()) >= 30, 60, "crawl start")

        server.stop()  # SIGTERM: Redis writes its AOF out before exiting
        wait_for(lambda: all("lost Redis at" in nodes.log(i) for i in range(2)), 30,
                 "both nodes finding Redis gone")  # fmt: skip
        assert all(proc.poll() is None for proc in nodes.procs), "a node died with Redis"
        server = services.start_redis(redis_dir, port, appendonly=True)

        assert nodes.wait(180) == [0, 0], nodes.tail()
        stored = {
            item["url"].removeprefix(slow_site.url) for item in read_items(tmp_path / "items")
        }
        assert stored == good_pages()
        for index in range(2):
            log = nodes.log(index)
            assert log.count("lost Redis at") == 1, "the outage is logged once per node"
            assert "is back after" in log
        hits = page_hits(slow_site)
        assert set(hits) >= HOPELESS
    finally:
        server.stop()


def test_kill_9_then_the_same_command_resumes_at_once(redis_url, redis_client, slow_site, nodes):
    """On one machine a restarted node takes back a dead node's leases without
    waiting out NODE_TIMEOUT (here far longer than the test)."""
    redis_client.lpush("site:start_urls", slow_site.url + "/category/books")
    settings = {**SETTINGS, "NODE_TIMEOUT": 600, "FRONTIER_LEASE_TIMEOUT": 600}
    first = nodes.start("site", redis_url, spider_args={"allow": ALLOW}, NODE_ID="one", **settings)
    wait_for(lambda: redis_client.zcard("site:leases:one") > 0, 60, "leases")
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    held = redis_client.zcard("site:leases:one")
    assert held > 0

    nodes.start("site", redis_url, spider_args={"allow": ALLOW}, NODE_ID="two", **settings)
    assert nodes.wait(120)[1] == 0, nodes.tail()
    assert f"{held} from node one leases reclaimed" in nodes.log(1)
    stored = {
        item["url"].removeprefix(slow_site.url) for item in read_items(nodes.tmp_path / "items")
    }
    books = {p for p in good_pages() if not p.startswith("/flaky/")}
    assert stored == books


def _urls_in_leases(client, name: str) -> list[str]:
    urls = []
    for key in client.scan_iter(match=f"{name}:leases:*", count=1000):
        for member in client.zrange(key, 0, -1):
            group, _, entry_id = member.partition(b"\n")
            data = client.hget(f"{name}:data:{group.decode()}", entry_id)
            urls.append(json.loads(data)["url"] if data else f"<no JSON for {member!r}>")
    return urls


def test_kill_9_during_a_recrawl_leaves_every_page_kept_once(
    redis_url, redis_client, slow_site, nodes
):
    """Product pages come back every second while nodes are killed: at the end each
    is in exactly one place (waiting for its date, queued, or leased), none lost,
    none twice."""
    from collections import Counter

    from extensions.recrawl.records import revisit_page

    rng = random.Random(1)
    settings = {**SETTINGS, "RECRAWL_RULES": json.dumps({"/product/": 1}),
                "MAX_IDLE_TIME_BEFORE_CLOSE": 0,
                "CLOSESPIDER_TIMEOUT": 10}  # fmt: skip
    redis_client.lpush("site:start_urls", slow_site.url + "/category/books")
    allow = {"allow": "/category/books,/product/"}
    for n in (1, 2, 3):
        nodes.start("site", redis_url, spider_args=allow, NODE_ID=f"n{n}", **settings)
    products = {f"/product/{i}" for i in catalog.product_ids("books")}

    def recrawled() -> int:
        hits = site_hits(slow_site)
        return sum(1 for page in products if hits.get(page, 0) >= 2)

    wait_for(lambda: recrawled() >= 20, 60, "recrawls under way")
    for victim_index in rng.sample(range(3), 2):  # two kills, a replacement after each
        time.sleep(rng.uniform(0.2, 1.5))
        nodes.procs[victim_index].send_signal(signal.SIGKILL)
        nodes.procs[victim_index].wait(10)
        nodes.start("site", redis_url, spider_args=allow, NODE_ID=f"r{victim_index}", **settings)
    codes = nodes.wait(120)
    assert codes.count(-signal.SIGKILL) == 2
    assert [c for c in codes if c != -signal.SIGKILL] == [0, 0, 0], nodes.tail()
    assert recrawled() == len(products)  # the recrawl went on through the kills

    kept = {fp: revisit_page(record) for fp, record in redis_client.hgetall("site:revisit").items()}
    assert {page[0].removeprefix(slow_site.url) for page in kept.values()} == products
    places = Counter(kept[fp][0] for fp in redis_client.zrange("site:due", 0, -1))
    places.update(json.loads(data)["url"] for data in queued(redis_client, "site"))
    places.update(_urls_in_leases(redis_client, "site"))
    assert {url.removeprefix(slow_site.url) for url in places} == products  # none lost
    assert {url: n for url, n in places.items() if n != 1} == {}  # none twice
