"""Host ranks (``frontier/ranks/``) against a real Redis: learned from the
links between registered domains, imported from a CSV, and the page budgets
they give."""

from __future__ import annotations

import hashlib
import json

import pytest
from scrapy import Request
from scrapy.http import HtmlResponse
from scrapy.settings import Settings

from extensions.commands.hostrank import read_ranks
from extensions.frontier.frontier import Frontier
from extensions.frontier.groups import group_for
from extensions.frontier.ranks.declared import budget_problem
from extensions.frontier.ranks.state import HostRanks, RankBudget
from extensions.keys import SpiderKeys
from extensions.spidermiddlewares.linkgraph import LinkGraphMiddleware
from tests.conftest import scrapy


def entry(url: str):
    data = json.dumps({"url": url}).encode()
    return (hashlib.sha1(url.encode()).digest(), group_for(url), 0, data)


@pytest.mark.parametrize("shards", [1, 3])
def test_a_host_ranks_by_the_registered_domains_that_link_to_it(redis_client, shards):
    ranks = HostRanks(redis_client, SpiderKeys.for_spider("t", shards=shards))
    links = [("popular.test", f"site{n}.test") for n in range(40)]
    links += [("popular.test", "site1.test")] * 5  # one domain again: no more
    links += [("quiet.test", "site1.test"), ("quiet.test", "site2.test")]
    links = [(host, host, domain) for host, domain in links]
    assert ranks.add_links(links) == (42, 0)  # each new linking domain raised a rank
    assert ranks.ranks(["popular.test", "quiet.test", "unknown.test"]) == {
        "popular.test": 40.0,  # a HyperLogLog: exact this small
        "quiet.test": 2.0,
    }
    assert [host for host, _ in ranks.top(2)] == ["popular.test", "quiet.test"]
    # an import replaces what was learned; a learned count only raises a rank
    ranks.set_ranks({"quiet.test": 500.0, "popular.test": 1.0})
    ranks.add_links([("quiet.test", "quiet.test", "site3.test"),
                     ("popular.test", "popular.test", "site99.test")])  # fmt: skip
    assert ranks.ranks(["popular.test", "quiet.test"]) == {
        "popular.test": 41.0,
        "quiet.test": 500.0,
    }
    assert 0 < ranks.graph_bytes("popular.test") < 1024  # a sparse sketch


def test_links_within_a_domain_and_from_a_link_farm_count_once(redis_client):
    """The middleware sends (host, linking registered domain) pairs: a site's
    links to itself are none, and ten thousand hosts of one domain are one."""
    keys = SpiderKeys.for_spider("t")
    middleware = LinkGraphMiddleware.__new__(LinkGraphMiddleware)
    middleware.queue_by = "host"
    middleware._sent, middleware._batch = set(), []
    middleware.ranks = HostRanks(redis_client, keys)

    class Stats:
        def inc_value(self, *args):
            pass

    middleware.stats = Stats()  # type: ignore[assignment]

    def page(url: str, *links: str) -> None:
        response = HtmlResponse(url, body=b"<html></html>")
        list(middleware.process_spider_output(response, [Request(link) for link in links]))

    page("http://www.target.test/", "http://blog.target.test/", "http://target.test/a")
    for n in range(50):  # a farm: 50 hosts of one domain link to the target
        page(f"http://h{n}.farm.test/", "http://www.target.test/")
    page("http://other.test/", "http://www.target.test/", "http://blog.target.test/")
    middleware.write()
    assert middleware.ranks.ranks(["www.target.test", "blog.target.test", "target.test"]) == {
        "www.target.test": 2.0,  # farm.test and other.test
        "blog.target.test": 1.0,
    }


def test_a_host_budget_grows_with_its_rank(redis_client):
    keys = SpiderKeys.for_spider("t")
    budget = RankBudget(floor=2, per_rank=3, ceiling=10)
    HostRanks(redis_client, keys).set_ranks({"ranked.test": 2, "top.test": 1000})
    frontier = Frontier(redis_client, keys, "n1", budget=budget)
    for host in ("plain.test", "ranked.test", "top.test"):
        frontier.enqueue([entry(f"http://{host}/{n}") for n in range(20)])
    queued = {
        host: redis_client.zcard(keys.queue(f"{host}.test")) for host in ("plain", "ranked", "top")
    }
    assert queued == {"plain": 2, "ranked": 8, "top": 10}  # 2; 2 + 3 * 2; the ceiling
    assert [budget.for_rank(r) for r in (0, 1, float("nan"), -5)] == [2, 5, 2, 2]


@pytest.mark.parametrize(
    "value",
    [{"floor": 0, "per_rank": 1, "ceiling": 10}, {"floor": 5, "per_rank": 1, "ceiling": 2},
     {"floor": 5, "ceiling": 9}, {"floor": "x", "per_rank": 1, "ceiling": 9}, "not a dict"],
)  # fmt: skip
def test_a_bad_rank_budget_is_refused(value):
    assert budget_problem(Settings({"HOST_BUDGET_BY_RANK": value}), "HOST_BUDGET_BY_RANK")


def test_an_import_reports_each_bad_row_by_its_line_and_keeps_the_rest():
    lines = ["host,rank", "a.test,10", "B.Test.,2.5", "http://c.test/,3", "d.test",
             "e.test,many", "f.test,-1", "g.test,inf", "", "h.test,0"]  # fmt: skip
    ranks, problems = read_ranks(lines, positions=False)
    assert ranks == {"a.test": 10, "b.test": 2.5, "h.test": 0}
    assert [p.split(":")[0] for p in problems] == ["line 4", "line 5", "line 6", "line 7", "line 8"]
    # a list of places (Tranco's, turned host,position): the first is the best
    ranks, problems = read_ranks(["a.test,1", "b.test,2", "c.test,3", "d.test,0"], True)
    assert ranks == {"a.test": 3, "b.test": 2, "c.test": 1}
    assert problems == ["line 4: '0' is not a position (1 or more)"]


@pytest.mark.spawns
def test_the_hostrank_command_imports_a_file_and_shows_the_top(redis_url, redis_client, tmp_path):
    ranks = tmp_path / "ranks.csv"
    ranks.write_text("host,rank\nbig.test,900\nsmall.test,3\nnot a host,7\nmid.test,40\n")
    budget = 'HOST_BUDGET_BY_RANK={"floor": 10, "per_rank": 2, "ceiling": 1000}'
    done = scrapy("hostrank", "site", "import", str(ranks), "-s", f"REDIS_URL={redis_url}")
    assert done.returncode == 0, done.stderr
    assert "imported 3 host ranks (1 rows skipped)" in done.stdout
    assert f"{ranks}: line 4: 'not a host' is not a host name, skipped" in done.stderr
    top = scrapy("hostrank", "site", "top", "--json", "-s", f"REDIS_URL={redis_url}", "-s", budget)
    rows = json.loads(top.stdout)["hosts"]
    assert [(r["host"], r["rank"], r["budget"]) for r in rows] == [
        ("big.test", 900.0, 1000), ("mid.test", 40.0, 90), ("small.test", 3.0, 16)
    ]  # fmt: skip
    shown = scrapy("hostrank", "site", "top", "--limit", "1", "-s", f"REDIS_URL={redis_url}")
    assert shown.stdout.splitlines()[1].split() == ["big.test", "900", "0", "-"]
    missing = scrapy("hostrank", "site", "import", str(tmp_path / "nope.csv"),
                     "-s", f"REDIS_URL={redis_url}")  # fmt: skip
    assert missing.returncode != 0 and "cannot read" in missing.stderr


@pytest.mark.parametrize("order", ["discovery", "importance"])
def test_with_importance_the_hosts_more_domains_link_to_are_leased_first(redis_client, order):
    keys = SpiderKeys.for_spider("t")
    ranks = HostRanks(redis_client, keys)
    ranks.add_links([("big.test", "big.test", f"d{n}.test") for n in range(30)])
    ranks.add_links([("mid.test", "mid.test", f"d{n}.test") for n in range(3)])
    frontier = Frontier(redis_client, keys, "n1")
    redis_client.hset(keys.frontier, "order", order)  # what RanksPart writes at open
    for host in ("none.test", "mid.test", "big.test"):  # found in this order
        frontier.enqueue([entry(f"http://{host}/{n}") for n in range(3)])
    leased, _ = frontier.lease(9, lease_timeout=60)
    hosts = [json.loads(lease.data)["url"].split("/")[2] for lease in leased]
    if order == "discovery":
        assert hosts == ["none.test"] * 3 + ["mid.test"] * 3 + ["big.test"] * 3
    else:  # the best-ranked host's whole queue first; each queue in its own order
        assert hosts == ["big.test"] * 3 + ["mid.test"] * 3 + ["none.test"] * 3
        urls = [json.loads(lease.data)["url"] for lease in leased]
        assert urls[:3] == [f"http://big.test/{n}" for n in range(3)]


def test_rank_keys_another_writer_spoiled_are_replaced_and_stop_nothing(redis_client):
    keys = SpiderKeys.for_spider("t")
    redis_client.set(keys.named("hostrank"), "not a sorted set")
    frontier = Frontier(redis_client, keys, "n1", budget=RankBudget(2, 1, 10))
    redis_client.hset(keys.frontier, "order", "importance")
    frontier.enqueue([entry(f"http://a.test/{n}") for n in range(5)])  # rank 0: the floor
    assert redis_client.zcard(keys.queue("a.test")) == 2
    leased, _ = frontier.lease(5, lease_timeout=60)
    assert len(leased) == 2
    redis_client.set(keys.named("inlinks", group="b.test"), "not a HyperLogLog")
    ranks = HostRanks(redis_client, keys)
    assert ranks.add_links([("b.test", "b.test", "x.test"), ("c.test", "c.test", "x.test")]) == (
        2,
        2,
    )
    assert ranks.ranks(["b.test", "c.test"]) == {"b.test": 1.0, "c.test": 1.0}


def test_importance_keeps_each_host_within_its_rate(redis_client):
    keys = SpiderKeys.for_spider("t")
    HostRanks(redis_client, keys).set_ranks({"big.test": 1000, "mid.test": 10})
    redis_client.hset(keys.rates, "*", 1)  # CLUSTER_HOST_RATE = 1
    redis_client.hset(keys.frontier, "order", "importance")
    frontier = Frontier(redis_client, keys, "n1")
    for host in ("none.test", "mid.test", "big.test"):
        frontier.enqueue([entry(f"http://{host}/{n}") for n in range(3)])
    leased, _ = frontier.lease(9, lease_timeout=60)
    # one slot each: the best-ranked first, none past its rate
    assert [json.loads(lease.data)["url"] for lease in leased] == [
        "http://big.test/0", "http://mid.test/0", "http://none.test/0"
    ]  # fmt: skip
