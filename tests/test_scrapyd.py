"""Deploy with scrapyd-deploy, schedule on two authenticated scrapyd nodes, cancel."""

import os
import shutil
import subprocess
import time

import pytest

from extensions.scrapyd import ScrapydNode
from servers import services
from tests.conftest import ROOT, scrapy
from tests.helpers import ALLOW, good_pages, wait_for

USER, PASSWORD = "crawler", "deploy-pw"


@pytest.fixture
def scrapyd_nodes(tmp_path, redis_url, mongo_db):
    uri, database, _ = mongo_db
    # The jobs get their connections from the node's environment, not from the egg.
    env = {"REDIS_URL": redis_url, "MONGO_URI": uri, "MONGO_DATABASE": database}
    nodes = [
        services.start_scrapyd(tmp_path / f"scrapyd{n}", username=USER, password=PASSWORD, env=env)
        for n in (1, 2)
    ]
    yield nodes
    for node in nodes:
        node.stop(timeout=20)


def deploy(tmp_path, nodes) -> subprocess.CompletedProcess:
    """scrapyd-deploy -a from a copy of the project whose targets are the test nodes."""
    project = tmp_path / "project"
    for name in ("crawler", "extensions"):
        shutil.copytree(ROOT / name, project / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "setup.py", project)
    config = (ROOT / "scrapy.cfg").read_text()
    config = config.replace("http://127.0.0.1:6800/", nodes[0].url + "/")
    config = config.replace("http://127.0.0.1:6801/", nodes[1].url + "/")
    (project / "scrapy.cfg").write_text(config)
    deploy_tool = shutil.which("scrapyd-deploy") or str(ROOT / ".venv/bin/scrapyd-deploy")
    return subprocess.run(
        [deploy_tool, "-a"], cwd=project, capture_output=True, text=True, timeout=120,
        env={**os.environ, "SCRAPYD_USERNAME": USER, "SCRAPYD_PASSWORD": PASSWORD},
    )  # fmt: skip


def jobs(node, state: str) -> list[dict]:
    client = ScrapydNode(node.url, USER, PASSWORD)
    return client.call("listjobs.json?project=crawler").get(state, [])


def wait_for_jobs(nodes, state: str, count: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(len(jobs(node, state)) >= count for node in nodes):
            return
        time.sleep(0.5)
    logs = "\n".join(str(jobs(node, "finished")) for node in nodes)
    pytest.fail(f"jobs not {state} within {timeout}s: {logs}")


@pytest.fixture
def slow_site():
    service = services.start_demo_site(latency=0.1)
    yield service
    service.stop()


def test_deploy_schedule_on_every_node_share_the_crawl_and_cancel(
    tmp_path, scrapyd_nodes, redis_url, redis_client, mongo_db, slow_site
):
    demo_site = slow_site
    result = deploy(tmp_path, scrapyd_nodes)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count('"status": "ok"') == 2, result.stdout + result.stderr

    urls = ",".join(node.url for node in scrapyd_nodes)
    auth_env = {"SCRAPYD_USERNAME": USER, "SCRAPYD_PASSWORD": PASSWORD}
    os.environ.update(auth_env)
    try:
        # (idle for long enough that the first node up waits for the other: on a
        # loaded machine one process starts seconds after the other)
        scheduled = scrapy("schedule", "site", "--nodes", urls, "-a", f"allow={ALLOW}",
                           "--setting", "MAX_IDLE_TIME_BEFORE_CLOSE=20",
                           "--setting", "CONCURRENT_REQUESTS=4")  # fmt: skip
        assert scheduled.returncode == 0, scheduled.stderr
        lines = scheduled.stdout.splitlines()
        assert [line.split()[0] for line in lines] == [n.url for n in scrapyd_nodes]
        assert all(" job " in line for line in lines)
        wait_for(lambda: redis_client.zcard("site:nodes") >= 2, 120, "both nodes joined")
        # pushed at once (a scrapy command's start, seconds on a loaded machine, once
        # outlasted the nodes' MAX_IDLE_TIME_BEFORE_CLOSE)
        redis_client.lpush("site:start_urls", demo_site.url + "/category/books")

        wait_for_jobs(scrapyd_nodes, "finished", 1)
        node_records = [redis_client.hgetall(k) for k in redis_client.keys("site:node:*")]
        assert len(node_records) == 2
        assert all(int(r[b"pages"]) > 0 for r in node_records), "both nodes crawled"
        _, _, db = mongo_db
        stored = {d["url"].removeprefix(demo_site.url) for d in db["site"].find({}, {"url": 1})}
        assert stored == {p for p in good_pages() if not p.startswith("/flaky/")}

        # A spider that waits for start URLs forever, then cancelled on both nodes.
        again = scrapy("schedule", "site", "--nodes", urls,
                       "--setting", "MAX_IDLE_TIME_BEFORE_CLOSE=0")  # fmt: skip
        assert again.returncode == 0, again.stderr
        wait_for_jobs(scrapyd_nodes, "running", 1)
        cancelled = scrapy("cancel", "site", "--nodes", urls)
        assert cancelled.returncode == 0, cancelled.stderr
        assert cancelled.stdout.count("cancelled job") == 2
        wait_for_jobs(scrapyd_nodes, "finished", 2)
    finally:
        for name in auth_env:
            os.environ.pop(name, None)


def test_wrong_credentials_and_unreachable_nodes_are_reported(scrapyd_nodes):
    dead = f"http://127.0.0.1:{services.free_port()}"
    bad_auth = scrapyd_nodes[0].url.replace("http://", "http://crawler:nope@")
    result = scrapy("schedule", "site", "--nodes", f"{bad_auth},{dead}")
    assert result.returncode == 1
    assert "HTTP 401 (wrong or missing credentials)" in result.stderr
    assert "unreachable" in result.stderr
    assert "nope" not in result.stderr + result.stdout
    assert scrapy("schedule", "site").returncode == 2  # no nodes anywhere
