"""The console's API and process, without a browser: roles, seeding through the
API, Redis going away, where it may listen, and the status it reads."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from extensions.console.auth import hash_password
from servers import services
from tests.conftest import ROOT, scrapy
from tests.helpers import api


def test_a_read_only_user_sees_everything_and_may_do_nothing(
    redis_url, redis_client, start_console
):
    redis_client.hset("shop:crawls", "alpha", "running")
    hashed = scrapy("console", "--hash-password", stdin="look-only\n").stdout.strip()
    assert hashed.startswith("pbkdf2_sha256$")
    users = {"viewer": {"password": hashed, "role": "read"},
             "boss": {"password": hash_password("in-charge"), "role": "admin"}}  # fmt: skip
    console = start_console(CONSOLE_USERS=json.dumps(users))
    assert api(console.url + "/api/shop/status", auth=("viewer", "look-only"))[0] == 200
    status, page = api(console.url + "/shop", auth=("viewer", "look-only"))
    assert status == 200 and "alpha" in page and "data-action" not in page
    pause = console.url + "/api/shop/crawls/alpha/pause"
    assert api(pause, data={}, auth=("viewer", "look-only"))[0] == 403
    assert redis_client.hget("shop:crawls", "alpha") == b"running"
    assert api(pause, data={}, auth=("boss", "in-charge"))[0] == 200
    assert redis_client.hget("shop:crawls", "alpha") == b"paused"
    audit = json.loads(redis_client.lindex("shop:audit", 0))
    assert (audit["user"], audit["action"]) == ("boss", "pause")


def test_seeding_through_the_api_checks_entries_as_scrapy_seed_does(
    redis_url, redis_client, start_console
):
    console = start_console()
    entries = ["http://127.0.0.1:1/ok", "ftp://nope.test/", "not a url"]
    status, body = api(console.url + "/api/shop/seed", data={"urls": entries, "crawl": "c1"})
    assert status == 200 and body["pushed"] == 1
    assert [r["entry"] for r in body["refused"]] == ["ftp://nope.test/", "not a url"]
    assert redis_client.llen("shop:start_urls") == 1
    assert json.loads(redis_client.lindex("shop:start_urls", 0))["crawl"] == "c1"
    assert redis_client.hget("shop:crawls", "c1") == b"running"
    assert api(console.url + "/api/shop/seed", data={"urls": ["http://a.test/"],
                                                     "crawl": "bad id"})[0] == 400  # fmt: skip
    assert api(console.url + "/api/nope/status")[0] == 404
    assert api(console.url + "/api/shop/hosts?limit=100000")[0] == 400
    # a script's action must say it sends JSON (a cross-site form cannot)
    request = urllib.request.Request(console.url + "/api/shop/seed", data=b"urls=x",
                                     method="POST")  # fmt: skip
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 415


def test_redis_going_away_is_a_503_and_the_console_answers_again_when_it_is_back(
    redis_url, tmp_path
):
    own = services.start_redis(tmp_path / "redis")
    port = own.url.rsplit(":", 1)[1].split("/")[0]
    console = services.start_console(own.url, log=tmp_path / "console.log")
    try:
        assert api(console.url + "/api/shop/status")[0] == 200
        own.stop()
        status, body = api(console.url + "/api/shop/status")
        assert status == 503 and "Redis is unavailable" in body
        assert api(console.url + "/shop")[0] == 503
        assert console.proc.poll() is None
        own = services.start_redis(tmp_path / "redis", int(port))
        assert api(console.url + "/api/shop/status")[0] == 200
    finally:
        console.stop()
        own.stop()


@pytest.mark.spawns
def test_the_console_refuses_to_listen_beyond_loopback_without_a_password(redis_url):
    result = scrapy("console", "--bind", "0.0.0.0", "-s", f"REDIS_URL={redis_url}")
    assert result.returncode != 0
    assert "CONSOLE_PASSWORD" in result.stderr and "127.0.0.1" in result.stderr
    result = scrapy("console", "-s", "CONSOLE_USERS={\"a\": {\"password\": \"plain\"}}",
                    "-s", f"REDIS_URL={redis_url}")  # fmt: skip
    assert result.returncode != 0 and "CONSOLE_USERS: a: password must be" in result.stderr


@pytest.mark.spawns
def test_make_console_is_a_target():
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^console: venv\n\t\$\(PY\) -m tools.console_demo", makefile, re.M)
    assert subprocess.run([sys.executable, "-m", "tools.console_demo", "--help"], cwd=ROOT,
                          capture_output=True, timeout=60).returncode == 0  # fmt: skip


def test_status_reads_the_recrawl_schedule_where_the_crawl_keeps_it(
    redis_url, mongo_db, start_console
):
    uri, database, db = mongo_db
    now = time.time()
    db["shop_status"].insert_many([{"_id": "a", "due": now - 60}, {"_id": "b", "due": now + 90}])
    store = {"RECRAWL_STORE": "mongo", "MONGO_URI": uri, "MONGO_DATABASE": database}
    console = start_console(**store)
    status, from_api = api(console.url + "/api/shop/status")
    args = [f"{k}={v}" for k, v in {**store, "REDIS_URL": redis_url}.items()]
    printed = json.loads(scrapy("status", "shop", "--json", *(a for s in args for a in ("-s", s)))
                         .stdout)  # fmt: skip
    assert status == 200 and (from_api["recrawl"], from_api["due"]) == (2, 1)
    assert from_api["due_by_hour"] == printed["due_by_hour"] and from_api["due_by_hour"][0] == 1


def test_a_scope_given_at_seed_time_and_changed_through_the_api(
    redis_url, redis_client, start_console
):
    console = start_console()
    seed = console.url + "/api/shop/seed"
    status, body = api(seed, data={"urls": ["http://127.0.0.1:1/"], "crawl": "c",
                                   "scope": {"scope": "host", "max_pages": -1}})  # fmt: skip
    assert status == 400 and body["error"].startswith("scope: max_pages:")
    assert redis_client.llen("shop:start_urls") == 0 and not redis_client.exists("shop:scope")
    status, body = api(seed, data={"urls": ["http://127.0.0.1:1/"], "crawl": "c",
                                   "scope": '{"scope": "host"}'})  # fmt: skip
    assert status == 200 and body["pushed"] == 1
    assert json.loads(redis_client.hget("shop:scope", "c")) == {"scope": "host"}

    change = console.url + "/api/shop/scope"
    status, body = api(change, data={"crawl": "c", "exclude": ["/private/"],
                                     "set": {"max_pages": "500"}})  # fmt: skip
    assert status == 200, body
    assert body["scope"] == {"scope": "host", "exclude": ["/private/"], "max_pages": 500}
    status, body = api(change, data={"crawl": "c", "exclude": ["(unclosed"]})
    assert status == 400 and body["error"].startswith("exclude:")
    status, page = api(console.url + "/shop")
    assert status == 200 and "/private/" in page and 'id="scope"' in page
    audit = json.loads(redis_client.lindex("shop:audit", 0))
    assert audit["action"] == "scope" and "/private/" in audit["detail"]
