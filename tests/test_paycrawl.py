"""Pay-per-crawl: a site that charges per page, and a crawl with a price cap and
a budget. Exactly the pages the budget covers are paid (signed, the price
covered) and stored; the rest are dead-lettered with the reason; the crawl's
ledger says what the site's own says."""

from __future__ import annotations

import datetime
import json
from collections import Counter

import pytest
from aiohttp import web
from http_message_signatures import HTTPMessageVerifier, algorithms
from scrapy.settings import Settings

from extensions import config
from extensions.paycrawl.price import Price, parse_price
from tests.conftest import read_items, scrapy
from tests.test_botauth import AGENT, Directory, Message, VerifyingSite

PRICED = [f"/p/{n}" for n in range(1, 9)]
PRICE, DEAR = "USD 0.01", "USD 1.00"
PAID_HEADER = '"crawler-exact-price"'


@pytest.mark.unit
@pytest.mark.parametrize(
    ("text", "price"),
    [
        ("USD 0.01", Price("USD", 10_000)),
        ("eur 2", Price("EUR", 2_000_000)),
        (" USD  0.0000019 ", Price("USD", 1)),  # a millionth's part is never read as more
        ("0.01", None),
        ("USD abc", None),
        ("USD 0.01 extra", None),
        ("USD -1", None),
        ("USD 1e3", None),
    ],
)
def test_a_price_is_a_currency_and_an_amount_in_millionths(text, price):
    assert parse_price(text) == price


@pytest.mark.unit
def test_paying_needs_a_budget_and_a_signing_key():
    alone = config.problems(Settings({"PAY_PER_CRAWL_MAX_PRICE": "USD 0.01"}))
    assert len(alone) == 1 and "needs PAY_PER_CRAWL_BUDGET" in alone[0]
    unsigned = Settings({"PAY_PER_CRAWL_MAX_PRICE": "USD 0.01", "PAY_PER_CRAWL_BUDGET": "USD 1"})
    [problem] = config.problems(unsigned)
    assert problem.startswith("PAY_PER_CRAWL_MAX_PRICE = ") and "needs BOT_AUTH_KEY" in problem
    other = Settings({"PAY_PER_CRAWL_MAX_PRICE": "USD 0.01", "PAY_PER_CRAWL_BUDGET": "EUR 1"})
    assert any("is in EUR" in p for p in config.problems(other))


class PayingSite(VerifyingSite):
    """Pages at a price: a first request is answered 402 with crawler-price; one
    that carries crawler-exact-price, signed with it covered, is served and
    charged (crawler-charged), and the site keeps its own ledger."""

    def __init__(self, directory: Directory):
        super().__init__(directory)  # (its start and stop: a site in a thread of its own)
        self.hits: Counter[str] = Counter()
        self.charged: dict[str, int] = {}
        self.unverified: list[str] = []

    def verified(self, request: web.Request) -> bool:
        verifier = HTTPMessageVerifier(signature_algorithm=algorithms.ED25519,
                                       key_resolver=self.directory)  # fmt: skip
        message = Message(request.method, f"http://{request.host}{request.path_qs}",
                          dict(request.headers))  # fmt: skip
        try:
            verifier.verify(message, expect_tag="web-bot-auth",
                            require_components=("@authority", PAID_HEADER),
                            max_age=datetime.timedelta(seconds=120))  # fmt: skip
        except Exception:
            return False
        return True

    async def handle(self, request: web.Request) -> web.Response:
        path = request.path
        self.hits[path] += 1
        if path == "/robots.txt":
            return web.Response(text="User-agent: *\nAllow: /\n")
        if path == "/":
            links = "".join(f"<a href='{p}'>{p}</a>" for p in
                            [*PRICED, "/free", "/dear", "/unpriced", "/bad"])  # fmt: skip
            return web.Response(text=f"<html><title>/</title>{links}</html>",
                                content_type="text/html")  # fmt: skip
        if path == "/free":
            return web.Response(text="<html><title>/free</title></html>", content_type="text/html")
        asks = {"/dear": DEAR, "/unpriced": None, "/bad": "USD abc"}.get(path, PRICE)
        offered = request.headers.get("crawler-exact-price")
        if offered is None or asks is None:
            headers = {"crawler-price": asks} if asks else {}
            return web.Response(status=402, text="Payment Required", headers=headers)
        if not self.verified(request) or offered != asks:
            self.unverified.append(path)
            return web.Response(status=402, headers={"crawler-price": asks})
        if path == "/flaky-paid":
            return web.Response(status=503, text="try later")
        self.charged[path] = parse_price(asks).micros  # type: ignore[union-attr]
        return web.Response(text=f"<html><title>{path}</title></html>", content_type="text/html",
                            headers={"crawler-charged": asks})  # fmt: skip


def test_exactly_the_pages_the_budget_covers_are_paid_signed_and_stored(
    redis_url, redis_client, nodes, key_files, tmp_path
):
    path, directory = key_files
    site = PayingSite(directory)
    url = site.start()
    try:
        # the crawl without an id from /, and crawl "other" (a ledger of its own)
        # with one page whose paid try fails
        redis_client.lpush("site:start_urls", url + "/")
        seeded = scrapy("seed", "site", "--crawl", "other", url + "/flaky-paid",
                        "-s", f"REDIS_URL={redis_url}")  # fmt: skip
        assert seeded.returncode == 0, seeded.stderr
        nodes.start("site", redis_url, MAX_IDLE_TIME_BEFORE_CLOSE=2, BOT_AUTH_KEY=str(path),
                    BOT_AUTH_SIGNATURE_AGENT=AGENT, PAY_PER_CRAWL_MAX_PRICE="USD 0.02",
                    PAY_PER_CRAWL_BUDGET="USD 0.05")  # fmt: skip
        assert nodes.wait(120) == [0], nodes.tail()
    finally:
        site.stop()

    assert site.unverified == []  # every paid request signed, its price covered
    paid = set(site.charged)
    assert len(paid) == 5 and paid <= set(PRICED)
    assert {p: site.hits[p] for p in PRICED} == {p: 2 if p in paid else 1 for p in PRICED}
    assert site.hits["/flaky-paid"] == 2  # its 402, its paid try: never again
    stored = {item["title"] for item in read_items(tmp_path / "items")}
    assert stored == {"/", "/free"} | paid

    letters = {}
    for raw in redis_client.lrange("site:dlq", 0, -1):
        letter = json.loads(raw)
        assert letter["kind"] == "payment_required", letter
        letters[letter["url"].removeprefix(url)] = letter["error"]
    assert set(letters) == (set(PRICED) - paid) | {"/dear", "/unpriced", "/bad", "/flaky-paid"}
    for unpaid in set(PRICED) - paid:
        assert "more than the crawl's PAY_PER_CRAWL_BUDGET (USD 0.05) has left" in letters[unpaid]
    assert "over PAY_PER_CRAWL_MAX_PRICE (USD 0.02)" in letters["/dear"]
    assert "no crawler-price" in letters["/unpriced"]
    assert "is not a price" in letters["/bad"]
    assert "the paid try answered HTTP 503: not tried again" in letters["/flaky-paid"]

    # the ledger is the site's, and nothing stays reserved
    ledger = {k.decode(): v.decode() for k, v in redis_client.hgetall("site:payments").items()}
    assert int(ledger["spent:"]) == sum(site.charged.values()) == 50_000
    assert int(ledger["pages:"]) == 5
    assert ledger.get("spent:other", "0") == "0"
    assert all(int(v) == 0 for k, v in ledger.items() if k.startswith("reserved:"))
    assert nodes.stat(0, "paycrawl/paid_pages") == 5
    status = scrapy("status", "site", "-s", f"REDIS_URL={redis_url}").stdout
    assert "paid for pages (the crawl): USD 0.05 on 5 pages" in status, status
