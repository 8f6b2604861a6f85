"""``scrapy crawl`` when Redis is not there."""

import pytest

from servers import services
from tests.conftest import scrapy

pytestmark = pytest.mark.spawns  # scrapy commands, no server fixture


def test_unreachable_redis_is_one_clear_line_and_exit_1():
    port = services.free_port()
    result = scrapy("crawl", "shop", "-s", f"REDIS_URL=redis://:hunter2@127.0.0.1:{port}/0",
                    "-s", "LOG_LEVEL=INFO")  # fmt: skip
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if "CRITICAL" in line]
    assert len(lines) == 1
    assert f"cannot reach Redis at redis://:***@127.0.0.1:{port}/0" in lines[0]
    assert "Traceback" not in result.stderr
    assert "hunter2" not in result.stderr


def test_unknown_spider_is_still_scrapys_message():
    result = scrapy("crawl", "nosuch", "-s", "REDIS_URL=redis://127.0.0.1:1/0")
    assert result.returncode != 0
    assert "Spider not found: nosuch" in result.stderr
