"""How ``make bench`` prints its figures, side by side (``tools/bench/``)."""

from __future__ import annotations

import os
import statistics

from tools.bench_crawl import (
    CONCURRENCY,
    FEATURES_OFF,
    OURS,
    PLAIN,
    PLAIN_NODE_TUNED,
    PLAIN_SETTINGS_TUNED,
    PLAIN_TUNED,
    POLITE,
    PYTHON_GC,
    RUNS,
    STOCK,
    Figures,
)
from tools.bench_measures import (
    CEILING_HOSTS,
    GROWTH_PROBE,
    MONGO_ITEMS,
    QUEUED_REQUESTS,
    SEEN_URLS,
    WAKE_PUSHES,
)


def report_growth(growth: dict[str, list[tuple[int, float, float, float]]]) -> None:
    print(f"\n12. Dupefilter cost as it grows: AOF bytes (what replicas receive too) and "
          f"client-side microseconds per new URL, over {GROWTH_PROBE:,} new URLs written "
          f"200 at a time, and Redis memory per seen URL")  # fmt: skip
    for name, rows in growth.items():
        for size, aof_bytes, micros, memory in rows:
            print(f"   {name:52s} at {size / 1e6:4.0f}M seen: {aof_bytes:7.1f} B/URL AOF "
                  f"{micros:7.2f} us/URL {memory:6.1f} B/URL memory")  # fmt: skip


def report_aof(aof: dict[str, list[float]]) -> None:
    print(f"\n11. AOF bytes per crawled page (the replication stream), one node, same crawl, "
          f"median of {RUNS}")  # fmt: skip
    for name, sizes in aof.items():
        print(f"   {name:52s} {statistics.median(sizes):8.0f} B/page")


def report_remote(remote: dict[str, Figures], rtt: float, local: dict[str, Figures]) -> None:
    print(f"\n10. One node, Redis {rtt:.2f} ms away (PING round trip through a delaying "
          f"proxy), median of {RUNS}")  # fmt: skip
    for name, figures in remote.items():
        line = f"   {name:52s} {figures.rate:8.0f} pages/s"
        if name in local and local[name].samples:
            line += f"   (Redis on loopback: {local[name].rate:.0f})"
        print(line)
    if remote[OURS].samples and remote[POLITE].samples:
        print(f"   with CLUSTER_HOST_RATE vs without, Redis away: "
              f"{remote[POLITE].rate / remote[OURS].rate:.2f}x")  # fmt: skip


def report_wake(wakes: dict[str, list[float]]) -> None:
    print(f"\n9. Seconds from pushing a start URL to its fetch, on a node idle for 6-11 s; "
          f"{WAKE_PUSHES * RUNS} pushes each")  # fmt: skip
    print(f"   {'variant':52s} {'median':>8s} {'max':>8s}")
    for name, latencies in wakes.items():
        print(f"   {name:52s} {statistics.median(latencies):8.2f} {max(latencies):8.2f}")


def report_seen_memory(seen: dict[str, float]) -> None:
    print(f"\n3. Redis memory per seen URL, {SEEN_URLS:,} URLs (used_memory delta)")
    for name, per_url in seen.items():
        print(f"   {name:52s} {per_url:8.1f} B/URL   100M URLs: {per_url * 1e8 / 2**30:6.1f} GiB")


def report_queued_memory(queued: dict[str, float]) -> None:
    print(f"\n4. Redis memory per queued request, {QUEUED_REQUESTS:,} product requests")
    for name, per_request in queued.items():
        unit = "B/host, over its requests" if "per host" in name else "B/request"
        print(f"   {name:52s} {per_request:8.1f} {unit}")


def report_commands(results: dict[str, Figures]) -> None:
    print("\n5. Redis traffic per crawled page, one node, section 1's runs: commands from "
          "INFO commandstats (Lua's inner calls included); round trips counted in redis-py, "
          "all threads and the reactor thread alone")  # fmt: skip
    print(f"   {'variant':52s} {'commands':>8s} {'round trips':>12s} {'on reactor':>11s}")
    stock = results[STOCK]
    ours = results[OURS]
    polite = results[POLITE]
    shown = ((STOCK, stock), (OURS, ours), (POLITE, polite))
    for name, figures in shown:
        print(f"   {name:52s} {figures.calls_per_page:8.2f} {figures.round_trips_per_page:12.3f} "
              f"{figures.reactor_round_trips_per_page:11.3f}")  # fmt: skip
    if ours.round_trips_per_page:
        print(f"   round trips, stock / this project: "
              f"{stock.round_trips_per_page / ours.round_trips_per_page:.1f}x")  # fmt: skip


def report_stack(stack: dict[str, Figures]) -> None:
    print(f"\n7. Middleware stack overhead, one node, same shop crawl, median of {RUNS}")
    base = stack["plain Scrapy, through the proxy"].rate
    for name, figures in stack.items():
        print(f"   {name:52s} {figures.rate:8.0f} pages/s {figures.rate / base:6.2f}x "
              f"{figures.cpu_ms_per_page:8.2f} CPU ms/page")  # fmt: skip


def report_store(stores: dict[str, list[float]], crawls: dict[str, Figures], server: str) -> None:
    print(f"\n6. Item store, {MONGO_ITEMS} items into an empty collection, on {server}; "
          f"median of {RUNS}")  # fmt: skip
    base = statistics.median(stores["per-item insert_one"])
    for name, rates in stores.items():
        rate = statistics.median(rates)
        print(f"   {name:52s} {rate:8.0f} items/s {rate / base:6.2f}x")
    pages = int(next(iter(crawls.values())).median("pages"))
    print(f"   the crawl ({pages} pages, site spider) with each:")
    jsonl = crawls["items to JSON Lines"].rate
    for name, figures in crawls.items():
        print(f"   {name:52s} {figures.rate:8.0f} pages/s {figures.rate / jsonl:6.2f}x")


def paired(ours: Figures, other: Figures) -> str:
    """CPU a page and rate against ``other`` run by run: the crawls of one run come
    minutes apart at most, so a machine that speeds up or slows down over the
    bench moves both sides of a pair alike, not the median of a side alone."""
    cpu = [(a.cpu / a.pages) / (b.cpu / b.pages) - 1
           for a, b in zip(ours.samples, other.samples, strict=True)]  # fmt: skip
    rate = [a.rate / b.rate for a, b in zip(ours.samples, other.samples, strict=True) if b.rate]
    return (f"run by run: CPU a page {', '.join(f'{c:+.0%}' for c in cpu)} "
            f"(median {statistics.median(cpu):+.0%}); rate "
            f"{', '.join(f'{r:.2f}x' for r in rate)}")  # fmt: skip


def report(results: dict[str, Figures], start_cpu: dict[str, list[float]]) -> None:
    pages = int(next(iter(results.values())).median("pages"))
    print(f"\n1. One node, {pages} pages of the demo shop, CONCURRENT_REQUESTS={CONCURRENCY}, "
          f"median of {RUNS} alternating runs, {os.cpu_count()} cores")  # fmt: skip
    print(f"   {'variant':52s} {'pages/s':>8s} {'ratio':>7s} {'CPU ms/page':>12s} "
          f"{'Redis cmds/page':>16s} {'start CPU s':>12s} {'ms/page past it':>16s}")  # fmt: skip
    plain = results[PLAIN].rate
    past_start = {}
    for name, figures in results.items():
        calls = f"{figures.calls_per_page:16.2f}" if figures.calls_per_page else f"{'-':>16s}"
        start = statistics.median(start_cpu[name]) if start_cpu.get(name) else 0.0
        past_start[name] = statistics.median(
            1000 * (sample.cpu - start) / sample.pages for sample in figures.samples
        )
        print(f"   {name:52s} {figures.rate:8.0f} {figures.rate / plain:6.2f}x "
              f"{figures.cpu_ms_per_page:12.2f} {calls} {start:12.2f} "
              f"{past_start[name]:16.2f}")  # fmt: skip
    ours = results["this project (leases, delayed retries, checkpoints)"].rate
    stock = results[STOCK].rate
    print(f"   this project vs stock scrapy-redis: {ours / stock:.2f}x; "
          f"vs plain Scrapy: {ours / plain:.2f}x; with CLUSTER_HOST_RATE vs without: "
          f"{results[POLITE].rate / ours:.2f}x; the collector tuning: "
          f"{ours / results[PYTHON_GC].rate:.2f}x")  # fmt: skip
    against(results, "against plain Scrapy with the node's collector tuning", OURS, PLAIN_TUNED)
    against(results, "against plain Scrapy with the node's collector tuning and "
            "CONCURRENT_ITEMS=16", OURS, PLAIN_SETTINGS_TUNED)  # fmt: skip
    base = PLAIN_NODE_TUNED
    against(results, "the distributed layer's own cost, against plain Scrapy with all the "
            "node's tuning", OURS, base)  # fmt: skip
    against(results, "with the node's page features off", FEATURES_OFF, base, run_by_run=False)
    if start_cpu.get(OURS) and start_cpu.get(base):
        per_page = past_start[OURS] - past_start[base]
        print(f"   of which starting and stopping (one 404 each): "
              f"{statistics.median(start_cpu[OURS]):.2f} s against "
              f"{statistics.median(start_cpu[base]):.2f} s; past it "
              f"{per_page:+.2f} ms a page ({per_page / past_start[base]:+.0%})")  # fmt: skip


def against(results: dict[str, Figures], label: str, side: str, base: str, *,
            run_by_run: bool = True) -> None:  # fmt: skip
    """One line of section 1: ``side``'s CPU a page and rate against ``base``'s."""
    ours, them = results[side], results[base]
    cost = ours.cpu_ms_per_page - them.cpu_ms_per_page
    print(f"   {label}: {cost:+.2f} ms CPU a page ({cost / them.cpu_ms_per_page:+.0%}), "
          f"{ours.rate / them.rate:.2f}x its rate")  # fmt: skip
    if run_by_run:
        print(f"     {paired(ours, them)}")


def report_sharding(sharding: dict[str, Figures], ceiling: list[dict]) -> None:
    print(f"\n15. The cost of sharding: one node, the shop crawl (one host), median of {RUNS}")
    base = sharding[next(iter(sharding))]
    for name, figures in sharding.items():
        print(f"   {name:50s} {figures.rate:8.0f} pages/s {figures.rate / base.rate:6.2f}x   "
              f"{figures.cpu_ms_per_page:5.2f} CPU ms/page   "
              f"{figures.calls_per_page:5.2f} Redis commands/page")  # fmt: skip
    print(f"   The Redis ceiling on the cluster (section 13's load generator, {CEILING_HOSTS} "
          "hosts; Redis and the clients share this machine's cores):")  # fmt: skip
    for row in ceiling:
        cpu = " / ".join(f"{part:.0%}" for part in row["per_primary"])
        print(f"   FRONTIER_SHARDS={row['shards']:<3} {row['clients']} client"
              f"{'s' if row['clients'] > 1 else ' '} {row['pages_per_s']:7.0f} pages/s   "
              f"primaries' CPU {cpu}   -> {row['ceiling']:6.0f} pages/s per busy core")  # fmt: skip


def report_scale(scale: dict[int, Figures]) -> None:
    print(f"\n2. Nodes on one Redis (this project), same site, median of {RUNS}")
    one = scale[1].rate
    for n, figures in scale.items():
        print(f"   {n} node{'s' if n > 1 else ' '}  {figures.rate:8.0f} pages/s  "
              f"{figures.rate / one:5.2f}x")  # fmt: skip
