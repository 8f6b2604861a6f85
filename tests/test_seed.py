"""``scrapy seed``, run as a user runs it."""

from tests.conftest import scrapy


def test_valid_urls_go_in_invalid_are_refused_with_exit_1(redis_url, redis_client, tmp_path):
    listing = tmp_path / "urls.txt"
    listing.write_text("# comment\n\nhttp://127.0.0.1:1/from-file\nnot a url\n")
    result = scrapy(
        "seed", "shop", "http://127.0.0.1:1/a", "ftp://127.0.0.1/x",
        '{"url": "http://127.0.0.1:1/json", "priority": 3}',
        "-f", str(listing), "-s", f"REDIS_URL={redis_url}",
    )  # fmt: skip
    assert result.returncode == 1
    assert "pushed 3 start URLs to shop:start_urls, refused 2" in result.stdout
    assert "refused 'ftp://127.0.0.1/x': unsupported scheme 'ftp'" in result.stderr
    assert "refused 'not a url': URL contains white space" in result.stderr
    # Nodes take the oldest entry first (RPOP): the order given on the command line.
    entries = [e.decode() for e in reversed(redis_client.lrange("shop:start_urls", 0, -1))]
    assert entries == [
        "http://127.0.0.1:1/a",
        '{"url": "http://127.0.0.1:1/json", "priority": 3}',
        "http://127.0.0.1:1/from-file",
    ]


def test_all_valid_exits_0(redis_url, redis_client):
    result = scrapy("seed", "site", "https://example.com/", "-s", f"REDIS_URL={redis_url}")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "pushed 1 start URLs to site:start_urls"
    assert redis_client.llen("site:start_urls") == 1


def test_entries_from_standard_input(redis_url, redis_client):
    result = scrapy(
        "seed", "site", "-f", "-", "-s", f"REDIS_URL={redis_url}",
        stdin="https://example.com/1\nhttps://example.com/2\n",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert redis_client.llen("site:start_urls") == 2


def test_unknown_spider_and_missing_urls_are_usage_errors(redis_url):
    result = scrapy("seed", "nosuch", "https://example.com/", "-s", f"REDIS_URL={redis_url}")
    assert result.returncode == 2
    assert "no spider named 'nosuch'" in result.stderr
    assert "shop" in result.stderr
    result = scrapy("seed", "shop", "-s", f"REDIS_URL={redis_url}")
    assert result.returncode == 2
    assert "no URLs given" in result.stderr


def test_unreachable_redis_is_one_line(redis_url):
    result = scrapy("seed", "shop", "https://example.com/", "-s",
                    "REDIS_URL=redis://:hunter2@127.0.0.1:1/0")  # fmt: skip
    assert result.returncode == 1
    assert "cannot reach Redis at redis://:***@127.0.0.1:1/0" in result.stderr
    assert "hunter2" not in result.stderr
    assert "Traceback" not in result.stderr


def test_with_the_overflow_start_urls_go_in_as_nodes_take_them(redis_url, redis_client, tmp_path):
    # a million entries need not sit in Redis at once: the command keeps at most
    # FRONTIER_START_URLS_MAX there and waits for the nodes (popped here by hand)
    import subprocess
    import sys
    import time

    from tests.conftest import ROOT

    listing = tmp_path / "urls.txt"
    listing.write_text("".join(f"https://example.com/{n}\n" for n in range(250)))
    seeding = subprocess.Popen(
        [sys.executable, "-m", "scrapy", "seed", "site", "-f", str(listing),
         "-s", f"REDIS_URL={redis_url}", "-s", "FRONTIER_OVERFLOW=mongo",
         "-s", "MONGO_URI=mongodb://127.0.0.1:1", "-s", "FRONTIER_START_URLS_MAX=40"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    taken: list[bytes] = []
    try:
        deadline = time.monotonic() + 60
        while seeding.poll() is None and time.monotonic() < deadline:
            assert redis_client.llen("site:start_urls") <= 40
            if redis_client.llen("site:start_urls") == 40:
                taken += redis_client.rpop("site:start_urls", 15) or []
            time.sleep(0.05)
        out, err = seeding.communicate(timeout=30)
    finally:
        seeding.kill()
    assert seeding.returncode == 0, err
    assert "pushed 250 start URLs" in out
    taken += redis_client.rpop("site:start_urls", 1000) or []
    assert [entry.decode() for entry in taken] == [f"https://example.com/{n}" for n in range(250)]
