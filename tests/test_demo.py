"""``make demo``, the README's first command, end to end."""

import os
import re
import subprocess
import sys

import pytest

from demosite import catalog
from tests.conftest import ROOT
from tests.helpers import SHOP_PAGES

pytestmark = pytest.mark.spawns  # scrapy commands and tools, no server fixture


def test_make_demo_crawls_the_shop_with_two_nodes_and_says_what_happened(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "MONGO_URI")}
    result = subprocess.run(
        [sys.executable, "-m", "tools.demo"],
        cwd=ROOT, env={**env, "DEMO_DIR": str(tmp_path)},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "pushed 1 start URLs to shop:start_urls" in out
    assert re.search(r"pages +\d+ +queued +\d+ +in flight +\d+ +seen +\d+", out)
    nodes = re.findall(r"node-\d-\d+ +pages +(\d+) +items +(\d+)", out)
    assert len(nodes) == 2 and all(int(pages) > 0 for pages, _ in nodes), out
    total = re.search(r"all nodes +pages +(\d+) +items +(\d+)", out)
    products = catalog.total_products()
    # every shop page once, and robots.txt once for the cluster (ROBOTSTXT_SHARED)
    assert total and int(total.group(1)) == len(SHOP_PAGES) + 1, out
    assert int(total.group(2)) == products
    assert "dead-lettered: 0" in out
    assert f"{products} lines, {products} distinct URLs" in out
    assert len(list((tmp_path / "items" / "shop").glob("*.jsonl"))) == 2


def test_a_smaller_shop_links_only_its_own_categories_and_a_negative_size_is_refused(capsys):
    """(Served: test_k8s.py's SIGTERM test crawls one and finds its pages alone.)"""
    from demosite.server import main, make_app

    app = make_app(categories=2)
    assert app["categories"] == catalog.CATEGORIES[:2]
    assert catalog.expected_pages(2) < catalog.expected_pages()
    assert catalog.total_products(2) == sum(catalog.category_sizes()[c] for c in app["categories"])
    with pytest.raises(SystemExit) as refused:
        main(["--categories", "-1"])
    assert refused.value.code == 2
    assert "--categories: a number of categories, 0 for all (not -1)" in capsys.readouterr().err
