"""How one crawl spreads over the primaries of a Redis Cluster: the frontier's own
scripts driven as a node drives them on a sharded frontier (lease from every
shard; write the pages' links with one call per shard; then release), on a
three-primary cluster, for FRONTIER_SHARDS of 1 (today's one slot) and more.
Reports each primary's share of the commands and of the memory the crawl took.

    .venv/bin/python -m tools.shard_spread [--shards 1,12,48,96] [--pages 10000]

``make bench`` runs it as section 14.
"""

from __future__ import annotations

import argparse
import random
import tempfile
from pathlib import Path

from servers import redis_cluster
from tools.redis_ceiling import page_links, request_json

HOSTS = 500  # hosts the crawl finds links to
LEASE_BATCH = 16


def crawl(url: str, shards: int, pages: int) -> dict[str, list[float]]:
    """Drive ``pages`` pages through a ``shards``-shard frontier; per primary, its
    share of the commands and of the memory the crawl added."""
    from extensions import connection
    from extensions.frontier.frontier import Frontier
    from extensions.frontier.redisops import execute
    from extensions.frontier.sent import SentFingerprints
    from extensions.keys import SpiderKeys

    client = connection.connect(url, cluster=True)
    primaries = client.get_primaries()
    client.flushall(target_nodes=client.PRIMARIES)
    client.config_resetstat(target_nodes=client.PRIMARIES)
    memory_before = _per_primary(client, primaries, lambda r: r.info("memory")["used_memory"])
    keys = SpiderKeys.for_spider("spread", hash_tag=True, shards=shards)
    frontier = Frontier(client, keys, "n1")
    rng = random.Random(shards)
    sent = SentFingerprints(100_000)
    seeds = [("", f"host{h}.example", 0, request_json(h, 0)) for h in range(HOSTS)]
    frontier.enqueue(seeds)
    counter, done = 10**6, 0  # past the ids of the links everyone repeats
    while done < pages:
        leased, _ = frontier.lease(LEASE_BATCH, 600)
        if not leased:
            break
        entries, counter = page_links(len(leased), HOSTS, rng, sent, counter)
        writes = client.pipeline(transaction=False)  # as a node writes a sharded frontier
        frontier.enqueue_on(writes, entries)
        execute(writes)
        releases = client.pipeline(transaction=False)
        frontier.release([lease.member for lease in leased], releases)
        releases.hincrby(keys.checkpoint, "done", len(leased))
        execute(releases)
        done += len(leased)
    commands = _per_primary(
        client, primaries, lambda r: sum(v["calls"] for v in r.info("commandstats").values())
    )
    memory = _per_primary(client, primaries, lambda r: r.info("memory")["used_memory"])
    added = [max(after - before, 0) for after, before in zip(memory, memory_before, strict=True)]
    client.close()
    return {"commands": _shares(commands), "memory": _shares(added)}


def _per_primary(client, primaries, read) -> list[float]:
    values = []
    for node in primaries:
        connection = client.get_redis_connection(node)
        values.append(float(read(connection)))
    return values


def _shares(values: list[float]) -> list[float]:
    total = sum(values) or 1.0
    return [value / total for value in values]


def measure(url: str, shard_counts: list[int], pages: int) -> list[tuple[int, dict]]:
    return [(shards, crawl(url, shards, pages)) for shards in shard_counts]


def report(rows: list[tuple[int, dict]], pages: int) -> None:
    print(f"\n14. One crawl on a three-primary Redis Cluster: each primary's share of the "
          f"commands and of the memory ({pages:,} pages, {HOSTS} hosts; even is 33%)")  # fmt: skip
    for shards, shares in rows:
        worst = max(abs(share * 3 - 1) for share in shares["commands"] + shares["memory"])
        commands = " ".join(f"{share:4.0%}" for share in shares["commands"])
        memory = " ".join(f"{share:4.0%}" for share in shares["memory"])
        print(f"   FRONTIER_SHARDS={shards:<3} commands {commands}   memory {memory}   "
              f"furthest from even: {worst:.0%}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", default="1,12,48,96")
    parser.add_argument("--pages", type=int, default=10_000)
    args = parser.parse_args()
    counts = [int(n) for n in args.shards.split(",")]
    with tempfile.TemporaryDirectory(prefix="spread-") as tmp:
        cluster = redis_cluster.start_redis_cluster(Path(tmp))
        try:
            rows = measure(cluster.url, counts, args.pages)
        finally:
            cluster.stop()
    report(rows, args.pages)


if __name__ == "__main__":
    main()
