"""The Firecrawl-compatible API, driven by the released ``firecrawl-py`` SDK
pointed at ``scrapy api`` on loopback: a page scraped to markdown through the
cluster's nodes, a site crawled with include and exclude paths and a limit to
completion and every document read, a site mapped from its sitemaps without a
page fetched, a key that is missing or wrong refused, and bad calls answered with
one clear error, nothing queued."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from collections import Counter

import pytest
from firecrawl import Firecrawl

from extensions.api.apikeys import new_key
from servers import services
from tests.conftest import ROOT, site_hits

KEY, KEY_HASH = new_key()


def start_api(redis_url: str, tmp_path, *settings: str, command: tuple[str, ...] = ("api",)):
    """``scrapy api`` (or another of its commands) with one key (its hash in
    API_KEYS) and ``settings`` (NAME=VALUE): its base URL and process."""
    port = services.free_port()
    log = (tmp_path / f"{command[0]}.log").open("wb")
    given = [arg for setting in (f"REDIS_URL={redis_url}", f"API_KEYS={KEY_HASH}", *settings)
             for arg in ("-s", setting)]  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "scrapy", *command, "--port", str(port), *given],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=log, text=True, start_new_session=True,
    )  # fmt: skip
    log.close()
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert " on http" in line, (tmp_path / f"{command[0]}.log").read_text()
    services.wait_for_port(port, 30, f"scrapy {command[0]}", proc)
    return f"http://127.0.0.1:{port}", proc


@pytest.fixture
def api(redis_url, tmp_path):
    url, proc = start_api(redis_url, tmp_path)
    yield url
    services.stop(proc)


def call(api: str, method: str, path: str, body: object = None, key: str | None = KEY):
    data = body if isinstance(body, bytes) else None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(api + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})  # fmt: skip
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.load(answer)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


def test_the_sdk_scrapes_and_crawls_through_the_cluster(
    redis_url, redis_client, small_shop, nodes, api
):
    nodes.start("web", redis_url, NODE_ID="w1")
    firecrawl = Firecrawl(api_key=KEY, api_url=api)

    page = firecrawl.scrape(small_shop.url + "/about", formats=["markdown", "links", "html"])
    assert "A shop that never changes." in page.markdown
    assert page.metadata.status_code == 200 and page.metadata.title == "About the Demo Shop"
    assert page.html and "<h1>About</h1>" in page.html
    assert page.links is not None
    assert not list(redis_client.scan_iter("web:crawl:api-*"))  # a scrape leaves nothing

    job = firecrawl.crawl(small_shop.url + "/", include_paths=["^/category/"],
                          exclude_paths=["^/category/garden"], limit=12, poll_interval=1,
                          timeout=180)  # fmt: skip
    assert job.status == "completed", job
    urls = [doc.metadata.source_url for doc in job.data]
    assert len(urls) == len(set(urls)) == 12  # every document read once, the limit held
    paths = {url.removeprefix(small_shop.url) for url in urls}
    assert "/" in paths  # the seed, whatever the paths say
    assert all(p.startswith("/category/") for p in paths - {"/"}), paths
    assert not [p for p in paths if p.startswith("/category/garden")], paths
    assert all(doc.markdown for doc in job.data)
    # its sitemaps were read (a way to pages, whatever the paths say), and are no documents
    assert "/sitemap-categories.xml" in site_hits(small_shop)

    # a map: what the site's sitemaps list, no page of it fetched
    products_before = {p for p in site_hits(small_shop) if p.startswith("/product/")}
    mapped = {
        link.url.removeprefix(small_shop.url) for link in firecrawl.map(small_shop.url + "/").links
    }
    listed = {p for p in mapped if p.startswith("/product/")}
    assert len(listed) > 100, sorted(mapped)[:20]
    assert {p for p in site_hits(small_shop) if p.startswith("/product/")} == products_before
    assert redis_client.hlen("web:api:jobs") == 1  # the crawl's: the scrape and the map forgotten

    # the site saw each page once, and robots.txt for its rules once for the cluster
    # (and read as a sitemap once by the crawl and once by the map), as for any crawl
    hits = Counter(site_hits(small_shop))
    assert hits["/robots.txt"] <= 3 and hits["/about"] == 1
    assert all(hits[p.split("?")[0]] >= 1 for p in paths)


def test_a_missing_or_wrong_key_and_bad_calls_get_one_clear_error(redis_url, redis_client, api):
    assert call(api, "POST", "/v2/scrape", {"url": "http://a.test/"}, key=None)[0] == 401
    status, body = call(api, "POST", "/v2/scrape", {"url": "http://a.test/"}, key="fc-nope")
    assert status == 401 and body["success"] is False and "API key" in body["error"]
    with pytest.raises(Exception, match=r"401|Unauthorized"):
        Firecrawl(api_key="fc-wrong-key", api_url=api).scrape("http://a.test/")
    bad = [
        (b"not json", "not JSON"),
        ({"url": "ftp://a.test/x"}, "url:"),
        ({"url": "http://a.test/", "formats": "markdown"}, "formats: must be a list"),
        ({"url": "http://a.test/", "onlyMainContent": "yes"}, "onlyMainContent"),
        ({"url": "http://a.test/", "limit": 10**9}, "limit"),
        ({"url": "http://a.test/", "includePaths": ["(oops"]}, "not a regular expression"),
    ]
    for body_sent, said in bad:
        path = "/v2/crawl" if isinstance(body_sent, dict) and len(body_sent) > 1 and (
            "limit" in body_sent or "includePaths" in body_sent) else "/v2/scrape"  # fmt: skip
        status, body = call(api, "POST", path, body_sent)
        assert status == 400 and said in body["error"], (body_sent, body)
    assert redis_client.llen("web:start_urls") == 0  # nothing queued
    assert call(api, "GET", "/v2/crawl/api-nope")[0] == 404


def test_a_scrape_answers_from_the_archive_within_max_age(redis_url, small_shop, nodes, tmp_path):
    warc = tmp_path / "warc"
    url, proc = start_api(redis_url, tmp_path, "WARC_ENABLED=True", f"WARC_DIR={warc}")
    try:
        nodes.start("web", redis_url, NODE_ID="w1", WARC_ENABLED=True, WARC_DIR=warc)
        firecrawl = Firecrawl(api_key=KEY, api_url=url)
        about = small_shop.url + "/about"
        live = firecrawl.scrape(about, formats=["markdown"], max_age=0)
        assert live.metadata.cache_state == "miss"
        assert Counter(site_hits(small_shop))["/about"] == 1

        # Firecrawl's default maxAge (two days): the capture the live fetch archived
        cached = firecrawl.scrape(about, formats=["markdown", "links"])
        assert cached.metadata.cache_state == "hit", cached.metadata
        assert cached.metadata.cached_at and cached.markdown == live.markdown
        assert cached.metadata.status_code == 200 and cached.links
        assert Counter(site_hits(small_shop))["/about"] == 1  # no request reached the site

        # a map adds what the archive holds of the host to what the site lists
        firecrawl.scrape(small_shop.url + "/about?seen=api", formats=["markdown"])
        mapped = firecrawl.map(small_shop.url + "/", sitemap="skip", search="seen=api")
        assert [link.url for link in mapped.links] == [small_shop.url + "/about?seen=api"]

        # a capture older than the call's maxAge is no answer: fetched again
        again = firecrawl.scrape(about, formats=["markdown"], max_age=1)
        assert again.metadata.cache_state == "miss"
        assert Counter(site_hits(small_shop))["/about"] == 2
    finally:
        services.stop(proc)


def test_a_private_address_is_refused_where_private_networks_are_denied(
    redis_url, redis_client, tmp_path
):
    url, proc = start_api(redis_url, tmp_path, "DENY_PRIVATE_NETWORKS=True")
    try:
        private = ("http://127.0.0.1:6379/", "http://169.254.169.254/latest/")
        paths = ("/v2/scrape", "/v2/crawl", "/v2/map")
        answers = [call(url, "POST", path, {"url": target})
                   for path in paths for target in private]  # fmt: skip
    finally:
        services.stop(proc)
    for status, body in answers:
        assert status == 400 and body["error"].startswith("Bad Request: url:"), body
    assert redis_client.llen("web:start_urls") == 0 and not redis_client.hlen("web:api:jobs")


def test_a_keys_own_quota_bounds_its_crawls_and_its_calls(redis_url, redis_client, tmp_path):
    quotas = json.dumps({KEY_HASH: {"max_pages": 5, "rate_limit": 3}})
    url, proc = start_api(redis_url, tmp_path, f"API_KEY_QUOTAS={quotas}")
    try:
        status, body = call(url, "POST", "/v2/crawl", {"url": "http://a.test/", "limit": 6})
        assert status == 400 and "at most 5" in body["error"], body
        status, body = call(url, "POST", "/v2/map", {"url": "http://a.test/", "limit": 6})
        assert status == 400 and "at most 5" in body["error"], body
        # seven calls past the first two: however a minute's turn splits them, one
        # minute has more than three
        answers = [call(url, "GET", "/v2/crawl/api-nope") for _ in range(7)]
    finally:
        services.stop(proc)
    refused = [body for status, body in answers if status == 429]
    assert refused and all(body["retryAfter"] >= 0 for body in refused), answers
    assert {status for status, _ in answers} <= {404, 429}
    assert redis_client.llen("web:start_urls") == 0  # nothing queued


def test_calls_that_ended_long_ago_are_forgotten_whole(redis_client):
    from scrapy.utils.project import get_project_settings

    from extensions.api.jobs import Jobs
    from extensions.installed import install_defaults
    from extensions.keys import SpiderKeys

    settings = get_project_settings()
    install_defaults(settings)  # as a command has them
    jobs = Jobs(redis_client, SpiderKeys.for_spider("web"), settings)
    scope = {"scope": "prefix", "sitemaps": "skip", "exclude": ["/private/"]}
    ended = jobs.start("crawl", "http://a.test/", {}, limit=5, scope=scope)
    running = jobs.start("crawl", "http://b.test/", {}, limit=5, scope=scope)
    unanswered = jobs.start("scrape", "http://c.test/", {})
    results = f"web:api:results:{ended.id}"
    redis_client.rpush(results, json.dumps({"markdown": "x"}))
    jobs.crawls.stop(ended.id)
    later = ended.created + settings.getint("API_RESULTS_TTL") + 1
    assert jobs.sweep(later) == 1  # the scrape its server never answered
    assert redis_client.ttl(results) > 0  # the ended crawl's results expire from now
    redis_client.delete(results)  # (as they will)
    assert jobs.sweep(later) == 1
    assert jobs.job(ended.id) is None and jobs.job(unanswered.id) is None
    assert not redis_client.hexists("web:crawls", ended.id)
    assert not redis_client.hexists("web:scope", ended.id)
    assert not list(redis_client.scan_iter(f"web:crawl:{ended.id}*"))
    # a crawl with work left stays, whatever its age
    assert jobs.job(running.id) is not None and redis_client.hexists("web:scope", running.id)
