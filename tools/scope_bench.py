"""``make bench`` section 30: crawl scope.

* CPU per URL of the scope's judgement, with 1 and 50 exclude patterns, against
  what a Scrapy user writes instead: a ``LinkExtractor``'s ``deny`` regexes (each
  pattern searched in turn) with ``allowed_domains`` (``url_is_from_any_domain``).
  The URLs are the links of Python's documentation (Debian's python3-doc), read
  with Scrapy's link extractor; without it, URLs made here.
* What a mid-crawl exclusion costs with 100,000 and 1,000,000 requests queued:
  the change and its sweep through the queue (``scrapy scope --exclude``'s own
  code): its time, the command's CPU and Redis's (``INFO cpu``).
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from scrapy.http import HtmlResponse
from scrapy.linkextractors import LinkExtractor
from scrapy.utils.url import url_is_from_any_domain

from extensions.keys import SpiderKeys
from extensions.scope.changes import Change, apply
from extensions.scope.document import parse
from extensions.scope.rules import Trail, judge
from extensions.scope.store import ScopeStore
from servers.clients import redis_at
from servers.nginx import PYTHON_DOCS

QUEUED = (100_000, 1_000_000)
ROUNDS = 5


def doc_urls(most: int = 20_000) -> tuple[list[str], str]:
    """Links of python3-doc's pages as a crawl would meet them (or made-up ones)."""
    urls: list[str] = []
    extractor = LinkExtractor()
    if PYTHON_DOCS.is_dir():
        for path in sorted(PYTHON_DOCS.rglob("*.html")):
            url = "https://docs.python.org/3/" + str(path.relative_to(PYTHON_DOCS))
            response = HtmlResponse(url, body=path.read_bytes(), encoding="utf-8")
            urls.extend(link.url for link in extractor.extract_links(response))
            if len(urls) >= most:
                return urls[:most], "the links of python3-doc's pages"
    if urls:
        return urls, "the links of python3-doc's pages"
    made = [f"https://docs.python.org/3/library/m{n}.html#s{n % 7}" for n in range(most)]
    return made, "URLs made here (python3-doc is not installed)"


def patterns(count: int) -> list[str]:
    # words that appear in some URLs: a search that finds nothing reads the whole URL
    words = ["whatsnew", "c-api", "howto", r"\?highlight=", "/_sources/", "distutils"]
    return [f"{words[n % len(words)]}{'' if n < len(words) else f'/x{n}'}" for n in range(count)]


def per_url(check, urls: list[str]) -> float:
    best = float("inf")
    for _ in range(ROUNDS):
        started = time.process_time()
        for url in urls:
            check(url)
        best = min(best, time.process_time() - started)
    return best / len(urls) * 1e6


def judge_cost(count: int, urls: list[str]) -> tuple[float, float]:
    scope = [parse({"scope": "domain", "exclude": patterns(count)})]
    trail = Trail("https://docs.python.org/3/", 1)
    ours = per_url(lambda url: judge(scope, url, trail), urls)
    deny = [re.compile(p) for p in patterns(count)]
    domains = ["python.org"]

    def scrapy_way(url: str) -> bool:
        return url_is_from_any_domain(url, domains) and not any(r.search(url) for r in deny)

    return ours, per_url(scrapy_way, urls)


def exclusion_cost(redis_url: str, queued: int) -> dict[str, float]:
    """A crawl of ``queued`` requests over 1,000 hosts, half of them under /private/,
    laid out as the frontier keeps them; then ``scrapy scope --exclude /private/``'s
    own code: the change, and the sweep that removes what it refuses."""
    server = redis_at(redis_url)
    keys = SpiderKeys.for_spider("scopebench")
    _forget(server)
    pipe = server.pipeline(transaction=False)
    for n in range(queued):
        group = f"h{n % 1000}.example#c"
        path = "private" if n % 2 else "public"
        request = json.dumps({"url": f"https://h{n % 1000}.example/{path}/{n}",
                              "meta": {"crawl_id": "c"}})  # fmt: skip
        pipe.zadd(keys.queue(group), {f"r{n}": n})
        pipe.hset(keys.data(group), f"r{n}", request)
        if n < 1000:
            pipe.sadd(keys.crawl_groups("c"), group)
        if n % 10_000 == 9_999:
            pipe.execute()
    pipe.hset(keys.frontier, "queued", queued)
    pipe.hset(keys.crawl("c"), "queued", queued)
    pipe.execute()
    store = ScopeStore(server, keys)
    store.set_crawl_scope("c", parse({"scope": "host"}))
    cpu_before = _redis_cpu(server)
    started = time.perf_counter()
    process_before = time.process_time()
    _, swept = apply(server, keys, Change("c", exclude=["/private/"]))
    took = time.perf_counter() - started
    command_cpu = time.process_time() - process_before
    redis_cpu = _redis_cpu(server) - cpu_before
    left = int(server.hget(keys.crawl("c"), "queued") or 0)
    _forget(server)
    server.close()
    return {"queued": queued, "seconds": took, "redis_cpu": redis_cpu,
            "command_cpu": command_cpu, "removed": swept.removed, "left": left}  # fmt: skip


def _forget(server) -> None:
    keys = list(server.scan_iter("scopebench:*", count=10_000))
    for start in range(0, len(keys), 1000):
        server.delete(*keys[start : start + 1000])


def _redis_cpu(server) -> float:
    info = server.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def measure(redis_url: str, work: Path) -> dict:
    urls, source = doc_urls()
    return {
        "source": source,
        "urls": len(urls),
        "judge": {count: judge_cost(count, urls) for count in (1, 50)},
        "exclusion": [exclusion_cost(redis_url, n) for n in QUEUED],
    }


def report(result: dict) -> None:
    print(f"   {result['urls']:,} URLs: {result['source']}")
    print("   CPU per URL (µs)         scope check   deny regexes + allowed_domains   ratio")
    for count, (ours, scrapy_way) in result["judge"].items():
        print(f"   {count:>2} exclude pattern(s)    {ours:>8.2f}     {scrapy_way:>10.2f}"
              f"                      {ours / scrapy_way:>5.2f}x")  # fmt: skip
    print("   a mid-crawl exclusion (half the queue under /private/): scrapy scope --exclude")
    print("       queued    removed       left     time   command CPU   Redis CPU   Redis µs/req")
    for row in result["exclusion"]:
        print(f"   {row['queued']:>10,} {row['removed']:>10,} {row['left']:>10,} "
              f"{row['seconds']:>7.1f}s {row['command_cpu']:>11.1f}s {row['redis_cpu']:>10.1f}s"
              f" {row['redis_cpu'] / row['queued'] * 1e6:>12.2f}")  # fmt: skip
