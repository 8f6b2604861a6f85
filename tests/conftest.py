"""Real servers on loopback ports, started per session or per test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest

from servers import services, zygote
from servers.clients import cluster_at, redis_at
from servers.redis_cluster import start_redis_cluster

ROOT = services.ROOT

# Fixtures that start a server: a test using none of them, and not marked
# ``spawns``, is a ``unit`` test (``make test-fast`` runs those alone).
SERVER_FIXTURES = frozenset({
    "redis_service", "redis_url", "redis_client", "mongo_uri", "mongo_db", "demo_site",
    "nodes", "redis_cluster", "cluster_client", "slow_site", "own_mongo", "live_proxy",
    "pushing_site", "password_redis", "small_shop", "slow_small_shop",
})  # fmt: skip
_in_unit_test = False


def _no_process_in_a_unit_test(event: str, args: tuple) -> None:
    if event == "subprocess.Popen" and _in_unit_test:
        raise RuntimeError(
            f"a unit test starts no process ({args[0]!r:.80}): mark it @pytest.mark.spawns"
        )


sys.addaudithook(_no_process_in_a_unit_test)


#: the modules whose tests take longest (a minute or so each: browsers, kills,
#: whole crawls), run first: xdist hands tests out in collection order, and one
#: of these drawn last kept its worker going for a minute after the others were done
LONG_FIRST = (
    "test_render_e2e.py", "test_pushback.py", "test_chaos.py", "test_scrapyd.py",
    "test_retry.py", "test_dns.py", "test_crawls_e2e.py", "test_cluster.py", "test_warc.py",
    "test_scoring.py", "test_warc_s3.py", "test_backlog.py", "test_shards_failover.py",
    "test_metrics.py", "test_render_scroll.py", "test_scope_e2e.py", "test_sitemaps.py",
)  # fmt: skip


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if not SERVER_FIXTURES & set(item.fixturenames) and not item.get_closest_marker("spawns"):
            item.add_marker(pytest.mark.unit)
    rank = {name: at for at, name in enumerate(LONG_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest as found


# the paced tests shared out among the workers that run them (tests/scheduling.py)
from tests.scheduling import pytest_xdist_make_scheduler  # noqa: E402, F401


@pytest.fixture(autouse=True)
def _unit_tier(request):
    """A unit test may start no process: the audit hook above refuses one."""
    global _in_unit_test
    _in_unit_test = request.node.get_closest_marker("unit") is not None
    try:
        yield
    finally:
        _in_unit_test = False


@pytest.fixture(scope="session", autouse=True)
def _forked_processes():
    """Nodes and ``scrapy`` commands forked from a process that imported Scrapy
    once (servers/zygote.py), started when a test first needs one; with
    TEST_EXEC_NODES set (the paced and alone tests, which measure rates), each
    started as users start them."""
    if not os.environ.get("TEST_EXEC_NODES"):
        zygote.use_zygote()
    yield
    zygote.stop_zygote()


@pytest.fixture(scope="session")
def redis_service(tmp_path_factory):
    service = services.start_redis(tmp_path_factory.mktemp("redis"))
    yield service
    service.stop()


@pytest.fixture
def redis_url(redis_service) -> str:
    """A Redis emptied for this test."""
    client = redis_at(redis_service.url)
    client.flushall()
    client.close()
    return redis_service.url


@pytest.fixture
def redis_client(redis_url):
    client = redis_at(redis_url)
    yield client
    client.close()


@pytest.fixture(scope="session")
def mongo_uri(tmp_path_factory):
    """``TEST_MONGO_URI`` if set (a real MongoDB), else a local nx-27017."""
    if os.environ.get("TEST_MONGO_URI"):
        yield os.environ["TEST_MONGO_URI"]
        return
    service = services.start_mongo_wire(tmp_path_factory.mktemp("mongo"))
    yield service.url
    service.stop()


@pytest.fixture
def mongo_db(mongo_uri):
    """A database of its own for this test: (uri, name, pymongo Database)."""
    import pymongo

    name = f"test_{uuid.uuid4().hex[:12]}"
    client = pymongo.MongoClient(mongo_uri, serverSelectionTimeoutMS=10_000)
    yield mongo_uri, name, client[name]
    client.drop_database(name)
    client.close()


@pytest.fixture
def own_mongo(tmp_path):
    """A MongoDB-wire server this test may stop and restart (helpers.restart)."""
    port = services.free_port()
    service = services.start_mongo_wire(tmp_path / "own-mongo", port)
    state = {"service": service, "port": port}
    yield state
    state["service"].stop()


@pytest.fixture
def make_store(mongo_db, tmp_path):
    uri, database, _ = mongo_db
    opened = []

    def make(**kwargs):
        kwargs.setdefault("journal_dir", tmp_path / "journal")
        kwargs.setdefault("retry_time", 1.0)
        from extensions.pipelines.mongo import MongoStore

        store = MongoStore(kwargs.pop("uri", uri), database, "items", **kwargs)
        store.open()
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


@pytest.fixture
def demo_site(request):
    """A fresh demo shop, so its hit counts belong to this test alone; its
    JavaScript pages have the test module's JS_ITEMS items, if it names some."""
    service = services.start_demo_site(js_items=getattr(request.module, "JS_ITEMS", 0))
    yield service
    service.stop()


@pytest.fixture
def small_shop():
    """A fresh shop of the first categories (tests/helpers.py SMALL_SHOP: 520
    pages, a quarter of the whole): for a crawl that needs a whole shop, not a big one."""
    from tests.helpers import SMALL_SHOP  # (helpers imports this module)

    service = services.start_demo_site(categories=SMALL_SHOP)
    yield service
    service.stop()


def site_hits(site: services.Service) -> dict[str, int]:
    with urllib.request.urlopen(site.url + "/__hits", timeout=10) as response:
        return json.load(response)


def scrapy(
    *args: str,
    timeout: float = 120,
    stdin: str | None = None,
    cwd: Path = ROOT,
    env: dict[str, str] | None = None,
):
    """Run a ``scrapy`` command of the project (or of the project in ``cwd``);
    returns the CompletedProcess."""
    forked = zygote.run(list(args), cwd=cwd, env=dict(env or os.environ), stdin=stdin,
                        timeout=timeout)  # fmt: skip
    if forked is not None:
        return forked
    return subprocess.run(
        [sys.executable, "-m", "scrapy", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        input=stdin,
        env=env,
    )


class Nodes:
    """Crawler nodes started by a test and stopped when it ends."""

    def __init__(self, tmp_path: Path):
        self.tmp_path = tmp_path
        self.procs: list[subprocess.Popen] = []
        self.logs: list[Path] = []

    def start(
        self, spider: str, redis_url: str, spider_args: dict | None = None, *,
        runner: str = "scrapy", env: dict[str, str] | None = None, **settings,
    ) -> subprocess.Popen:  # fmt: skip
        log = self.tmp_path / f"node-{len(self.procs) + 1}.log"
        settings.setdefault("ITEMS_DIR", self.tmp_path / "items")
        # the journal is per machine (data/journal): each test keeps its own
        settings.setdefault("MONGO_JOURNAL_DIR", self.tmp_path / "journal")
        settings.setdefault("PARQUET_SPOOL_DIR", self.tmp_path / "parquet-spool")
        settings.setdefault("LOG_LEVEL", "INFO")
        settings.setdefault("STATS_CLASS", "tests.statsdump.DumpingStatsCollector")
        settings.setdefault("STATS_DUMP_FILE", log.with_suffix(".stats.json"))
        proc = services.start_node(
            spider,
            redis_url,
            log=log,
            settings=settings,
            spider_args=spider_args,
            runner=runner,
            env=env,
        )
        self.procs.append(proc)
        self.logs.append(log)
        return proc

    def wait(self, timeout: float = 180) -> list[int]:
        deadline = time.monotonic() + timeout
        for proc in self.procs:
            remaining = max(deadline - time.monotonic(), 0.1)
            try:
                proc.wait(remaining)
            except subprocess.TimeoutExpired:
                pytest.fail(f"node did not close by itself within {timeout}s:\n{self.tail()}")
        return [proc.returncode for proc in self.procs]

    def log(self, index: int) -> str:
        return self.logs[index].read_text(errors="replace")

    def stats(self, index: int) -> dict[str, Any]:
        """Node ``index``'s closing stats (tests/statsdump.py), {} before it closed."""
        path = self.logs[index].with_suffix(".stats.json")
        return json.loads(path.read_text()) if path.exists() else {}

    def stat(self, index: int, name: str) -> int:
        """One counter of node ``index``'s closing stats (0 if absent)."""
        return int(self.stats(index).get(name, 0))

    def total(self, name: str) -> int:
        """One counter summed over every node started."""
        return sum(self.stat(index, name) for index in range(len(self.procs)))

    def tail(self, lines: int = 40) -> str:
        return "\n".join(
            f"--- {log.name}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
            for log in self.logs
        )

    def stop_all(self) -> None:
        for proc in self.procs:
            services.stop(proc, timeout=15)


@pytest.fixture
def key_files(tmp_path):
    """A Web Bot Auth key made by ``scrapy botauth keygen``, and its directory as
    a verifier reads it (tests/test_botauth.py)."""
    from tests.test_botauth import Directory

    made = scrapy("botauth", "keygen", str(tmp_path / "bot.pem"))
    assert made.returncode == 0, made.stderr
    document = json.loads((tmp_path / "bot.pem.directory.json").read_text())
    return tmp_path / "bot.pem", Directory(document)


@pytest.fixture
def nodes(tmp_path):
    started = Nodes(tmp_path)
    yield started
    started.stop_all()


def crawler_with_addon(spidercls: Any = None, settings: dict | None = None) -> Any:
    """Scrapy's ``get_crawler``, with the add-on that installs the stack's settings
    (its components read them as installed, with no defaults of their own)."""
    from scrapy import Spider
    from scrapy.utils.test import get_crawler

    addon = {"ADDONS": {"extensions.addon.DistributedAddon": 0}}
    crawler = get_crawler(spidercls or Spider, {**(settings or {}), **addon})
    crawler._apply_settings()
    return crawler


def read_items(directory: Path) -> list[dict]:
    items = []
    for path in sorted(directory.rglob("*.jsonl")):
        with path.open(encoding="utf-8") as lines:
            items.extend(json.loads(line) for line in lines)
    return items


def queued(client, name: str) -> list[bytes]:
    """Every request (JSON) waiting in spider ``name``'s host queues (b"" for an
    id whose JSON is missing)."""
    found: list[bytes] = []
    for key in sorted(client.scan_iter(match=f"{name}:queue:*", count=1000)):
        members = client.zrange(key, 0, -1)
        ids = [m for m in members if not m.startswith(b"{")]
        data_key = f"{name}:data:" + key.decode().split(":queue:", 1)[1]
        stored = dict(zip(ids, client.hmget(data_key, ids), strict=True)) if ids else {}
        found += [m if m.startswith(b"{") else stored[m] or b"" for m in members]
    return found


def queue_requests(client, name: str, *requests: str | bytes, pipe=None) -> None:
    """Put request JSON into spider ``name``'s queue as a node would (no seen check)."""
    from extensions.frontier.frontier import Frontier
    from extensions.frontier.groups import group_for
    from extensions.keys import SpiderKeys

    entries = []
    for data in requests:
        raw = data.encode() if isinstance(data, str) else data
        try:
            url = json.loads(raw).get("url", "")
        except (ValueError, AttributeError):
            url = ""
        entries.append(("", group_for(str(url)), 0, raw))
    frontier = Frontier(client, SpiderKeys.for_spider(name), "test")
    if pipe is None:
        frontier.enqueue(entries)
    else:
        frontier.enqueue_on(pipe, entries)


@pytest.fixture(scope="module")
def redis_cluster(tmp_path_factory):
    cluster = start_redis_cluster(tmp_path_factory.mktemp("cluster"))
    yield cluster
    cluster.stop()


@pytest.fixture
def cluster_client(redis_cluster):
    client = cluster_at(redis_cluster.url)
    client.flushall()  # every primary
    yield client
    client.close()


@pytest.fixture
def start_console(redis_url, tmp_path):
    started: list[services.Service] = []

    def start(**settings) -> services.Service:
        settings.setdefault("CONSOLE_REFRESH", 0.5)
        log = tmp_path / f"console-{len(started)}.log"
        console = services.start_console(redis_url, log=log, settings=settings)
        console.log = log  # type: ignore[attr-defined]
        started.append(console)
        return console

    yield start
    for console in started:
        console.stop()
