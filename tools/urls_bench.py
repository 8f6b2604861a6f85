"""``make bench`` section 24: one page, one URL.

* The demo site's ``/variants/`` pages (40 items, each linked under five URLs and a
  print view, and an AMP version of each naming its item as canonical), crawled by
  plain Scrapy (a spider following the same links, its own dupefilter, a feed
  export) and by one node: fetches and stored items per distinct page with Scrapy's
  fingerprint alone (the chain, content duplicates and canonicals off), with the chain only,
  with the project's defaults (the chain and canonicals), and with content
  duplicates on too.
* CPU per URL of the default normalizer chain, next to Scrapy's ``canonicalize_url``
  (which every request already pays for its fingerprint), and per page of the
  content digest on Python's HTML documentation (real pages nobody here wrote).
* Redis bytes per page of the content digests, at 1 M and 10 M pages, and of the
  near-duplicate SimHashes (pages of 100,000 registered domains), with the CPU a
  page's SimHash takes on Python's documentation.
"""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path

from scrapy.settings import Settings
from w3lib.url import canonicalize_url

from demosite.variants import ITEMS
from extensions import defaults
from extensions.spidermiddlewares.duplicates import content_digest, stable_text
from extensions.spidermiddlewares.nearduplicates import BLOCK_KEPT, fingerprint, words
from extensions.urlnorm.chain import UrlNormalizerChain
from servers import services
from servers.clients import redis_at
from servers.nginx import PYTHON_DOCS
from tools.bench_crawl import BENCH_SPIDERS, NO_ADDON

DISTINCT_PAGES = 2 * ITEMS + 2  # items, AMP versions, and the two index pages
OFF = {"URL_NORMALIZE_ENABLED": "False", "CONTENT_DUPLICATES": "off", "CANONICAL_ENABLED": "False"}
PLAIN = "plain Scrapy (its dupefilter, feed export)"
VARIANTS = {
    PLAIN: {"ADDONS": NO_ADDON, "SPIDER_MODULES": BENCH_SPIDERS},
    "this project, Scrapy's fingerprint alone": OFF,
    "the normalizer chain only": {"CONTENT_DUPLICATES": "off", "CANONICAL_ENABLED": "False"},
    "the project's defaults": {},
    'defaults + CONTENT_DUPLICATES="drop"': {"CONTENT_DUPLICATES": "drop"},
}
SIZES = (1_000_000, 10_000_000)
FILL = """
local prefix, start, count = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
for n = start, start + count - 1 do
  local d = redis.sha1hex(tostring(n))
  local field = string.char(tonumber(d:sub(5, 6), 16), tonumber(d:sub(7, 8), 16),
    tonumber(d:sub(9, 10), 16), tonumber(d:sub(11, 12), 16), tonumber(d:sub(13, 14), 16),
    tonumber(d:sub(15, 16), 16), tonumber(d:sub(17, 18), 16), tonumber(d:sub(19, 20), 16))
  redis.call('HSETNX', prefix .. d:sub(1, 4), field,
             'https://www.host' .. (n % 100000) .. '.example/articles/page-' .. n .. '.html')
end
return count
"""

# what nearduplicates.NEAREST keeps of a page new by its SimHash (random ones here):
# its 4 blocks' fields, the newest BLOCK_KEPT a block, and its first URL
FILL_NEAR = """
local prefix, start, count, kept = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
for n = start, start + count - 1 do
  local d = redis.sha1hex(tostring(n))
  local fp = ''
  for i = 1, 16, 2 do fp = fp .. string.char(tonumber(d:sub(i, i + 1), 16)) end
  local key = prefix .. 'host' .. (n % 100000) .. '.example'
  for t = 0, 3 do
    local field = 'b' .. string.char(t) .. string.sub(fp, 2 * t + 1, 2 * t + 2)
    local value = (redis.call('HGET', key, field) or '') .. fp
    if #value > 8 * kept then value = string.sub(value, -8 * kept) end
    redis.call('HSET', key, field, value)
  end
  redis.call('HSETNX', key, 'u' .. fp,
             'https://www.host' .. (n % 100000) .. '.example/articles/page-' .. n .. '.html')
end
return count
"""


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.load(answer)


def crawl(redis_url: str, settings: dict[str, str], workdir: Path) -> dict[str, float]:
    client = redis_at(redis_url)
    client.flushall()
    site = services.start_demo_site()
    try:
        starts = [site.url + "/variants/", site.url + "/variants/amp/"]
        items = workdir / "items"
        spider, spider_args = "site", {"allow": "/variants/"}
        if settings.get("ADDONS") == NO_ADDON:  # plain Scrapy: no Redis, a feed export
            spider, spider_args = "plain_site", {**spider_args, "start": ",".join(starts)}
            feed = {str(items / "items.jsonl"): {"format": "jsonlines", "overwrite": True}}
            settings = {**settings, "FEEDS": json.dumps(feed)}
        else:
            client.lpush("site:start_urls", *starts)
        node = services.start_node(
            spider, redis_url, log=workdir / "node.log",
            settings={"MAX_IDLE_TIME_BEFORE_CLOSE": "3", "LOG_LEVEL": "INFO",
                      "ITEMS_DIR": str(items), **settings},
            spider_args=spider_args,
        )  # fmt: skip
        node.wait(300)
        fetched = sum(n for path, n in _get(site.url + "/__hits").items() if path != "/robots.txt")
        stored = sum(len(p.read_text().splitlines()) for p in items.rglob("*.jsonl"))
        return {"fetched": fetched / DISTINCT_PAGES, "stored": stored / DISTINCT_PAGES}
    finally:
        site.stop()
        client.close()


def chain_cost(count: int = 50_000) -> dict[str, float]:
    settings = Settings({name: getattr(defaults, name) for name in dir(defaults) if name.isupper()})
    chain = UrlNormalizerChain.from_settings(settings)
    assert chain is not None
    shapes = [
        "https://www.example.com/articles/{n}/a-title-of-some-length",
        "https://shop.example.com/item?id={n}&colour=red&size=m",
        "https://blog.example.org/{n}?utm_source=feed&utm_medium=rss&utm_campaign=x",
        "http://forum.example.net/thread.php;jsessionid=ABC{n}?t={n}&page=2",
        "https://Example.COM:443/search?q=term&sort=date&page={n}#results",
    ]
    urls = [shapes[n % len(shapes)].format(n=n) for n in range(count)]
    started = time.process_time()
    for url in urls:
        chain.normalize(url)
    ours = (time.process_time() - started) / count
    started = time.process_time()
    for url in urls:
        canonicalize_url(url)
    scrapy = (time.process_time() - started) / count
    return {"chain_us": ours * 1e6, "canonicalize_us": scrapy * 1e6}


def digest_cost() -> dict[str, float]:
    pages = [path.read_bytes() for path in sorted(PYTHON_DOCS.rglob("*.html"))[:1500]]
    if not pages:
        return {}
    started = time.process_time()
    for body in pages:
        content_digest(body)
    spent = time.process_time() - started
    started = time.process_time()
    for body in pages:
        fingerprint(words(stable_text(body)))
    near = time.process_time() - started
    size = sum(map(len, pages)) / len(pages)
    return {"pages": len(pages), "digest_us": spent / len(pages) * 1e6,
            "simhash_us": near / len(pages) * 1e6, "kib": size / 1024}  # fmt: skip


def digest_bytes(redis_url: str) -> dict[str, dict[int, float]]:
    client = redis_at(redis_url)
    result: dict[str, dict[int, float]] = {"digests": {}, "near": {}}
    try:
        for kind, script, args in (("digests", FILL, ["b:digests:"]),
                                   ("near", FILL_NEAR, ["b:near:"])):  # fmt: skip
            fill = client.register_script(script)
            for size in SIZES:
                client.flushall()
                before = client.info("memory")["used_memory"]
                step = 10_000  # pages a script call: well inside a client's timeout
                for start in range(0, size, step):
                    more = [BLOCK_KEPT] if kind == "near" else []
                    fill(args=[*args, start, min(step, size - start), *more])
                result[kind][size] = (client.info("memory")["used_memory"] - before) / size
        client.flushall()
    finally:
        client.close()
    return result


def measure(redis_url: str, workdir: Path) -> dict:
    crawls = {}
    for n, (name, settings) in enumerate(VARIANTS.items()):
        path = workdir / f"variant-{n}"
        path.mkdir(parents=True, exist_ok=True)
        crawls[name] = crawl(redis_url, settings, path)
    return {"crawls": crawls, "chain": chain_cost(), "digest": digest_cost(),
            "bytes": digest_bytes(redis_url)}  # fmt: skip


def report(result: dict) -> None:
    print(f"   /variants/: {DISTINCT_PAGES} distinct pages, each under several URLs")
    print(f"     {'variant':42s} {'fetches/page':>13s} {'items/page':>11s}")
    for name, row in result["crawls"].items():
        print(f"     {name:42s} {row['fetched']:13.2f} {row['stored']:11.2f}")
    chain = result["chain"]
    print(
        f"   the default chain: {chain['chain_us']:.1f} µs of CPU per URL (Scrapy's "
        f"canonicalize_url, paid by every fingerprint: {chain['canonicalize_us']:.1f} µs)"
    )
    digest = result["digest"]
    if digest:
        print(
            f"   content digest: {digest['digest_us']:.0f} µs of CPU per page on "
            f"{digest['pages']} pages of Python's documentation "
            f"({digest['kib']:.0f} KiB each on average); its SimHash: "
            f"{digest['simhash_us']:.0f} µs (the masking it shares with the digest included)"
        )
    for size, per in result["bytes"]["digests"].items():
        near = result["bytes"]["near"][size]
        print(f"   Redis bytes per page at {size:,} pages: {per:.0f} for the digests, "
              f"{near:.0f} for the SimHashes (100,000 domains)")  # fmt: skip


if __name__ == "__main__":  # this section alone: python -m tools.urls_bench
    import os
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        server = services.start_redis(Path(tmp) / "redis")
        try:
            report(measure(server.url, Path(tmp)))
        finally:
            server.stop()
    os._exit(0)
