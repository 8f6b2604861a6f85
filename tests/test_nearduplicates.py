"""Near duplicates: the SimHash of a page's words, and its lookup in a real
Redis (per registered domain, bounded a block, the first URL kept)."""

from __future__ import annotations

import random

import pytest
from scrapy import Request

from extensions.spidermiddlewares.duplicates import stable_text
from extensions.spidermiddlewares.nearduplicates import (
    BLOCK_KEPT,
    NearIndex,
    distance,
    feature_hash,
    fingerprint,
    words,
)
from servers.nginx import PYTHON_DOCS
from tests.test_duplicates import checks, response, run

VOCABULARY = [f"w{n:04d}" for n in range(5000)]


def article(seed: int, extra: str = "", count: int = 300) -> bytes:
    """A page of ``count`` words of its own (``seed``), and ``extra``."""
    chosen = random.Random(seed).sample(VOCABULARY, count)
    return (
        f"<html><head><title>Story {seed}</title><script>var t={seed}</script></head>"
        f"<body><article><p>{' '.join(chosen)}</p></article><aside>{extra}</aside>"
        "<p>Generated 2026-12-03T10:00:00Z</p></body></html>"
    ).encode()


def print_of(body: bytes) -> int:
    return fingerprint(words(stable_text(body)))


@pytest.mark.unit
def test_the_fingerprint_is_the_simhash_librarys_on_real_pages():
    from simhash import Simhash

    pages = sorted(PYTHON_DOCS.rglob("*.html"))[:40] or []
    bodies = [path.read_bytes() for path in pages] + [article(n) for n in range(5)]
    known: dict[bytes, bytes] = {}  # word hashes kept from page to page, as a node keeps them
    for body in bodies:
        page_words = words(stable_text(body))
        theirs = Simhash([w.decode("utf-8", "replace") for w in page_words], hashfunc=feature_hash)
        assert fingerprint(page_words) == theirs.value
        assert fingerprint(page_words, known) == theirs.value
    assert known and fingerprint(set()) == 0


@pytest.mark.unit
def test_a_page_a_few_words_apart_is_bits_apart_and_other_pages_are_far():
    story = print_of(article(1))
    # a recommendations block that differs per visit, a banner: a few words
    assert distance(print_of(article(1, extra="recommended: story 7, story 9")), story) <= 3
    assert distance(print_of(article(1, extra="You are reading a mirror")), story) <= 3
    # masked: the time it was made, its scripts
    assert print_of(article(1).replace(b"10:00:00Z", b"11:59:30Z")) == story
    # other stories share no words: about half of the bits differ
    others = [distance(print_of(article(n)), story) for n in range(2, 40)]
    assert min(others) > 10
    # words, not markup: the same text in other tags is the same page
    assert print_of(article(1).replace(b"<p>", b"<div>")) == story
    # words of any script (as bytes: only ASCII letters are lower-cased)
    found = words("<p>Grüße aus Köln, 東京 und Москва</p>".encode())
    assert found == {w.encode() for w in ("grüße", "aus", "köln", "東京", "und", "Москва")}


def test_the_first_page_of_a_domain_within_the_distance_is_found_and_kept(redis_client):
    index = NearIndex(redis_client, "t:near:", 3)
    story = print_of(article(1))
    assert index.nearest("a.test", story, "http://a.test/story/1") is None
    near = print_of(article(1, extra="recommended: story 7, story 9"))
    assert index.nearest("a.test", near, "http://a.test/story/1?from=7") == "http://a.test/story/1"
    # the same URL again (a retry, a recrawl) finds itself: the caller takes it as new
    assert index.nearest("a.test", story, "http://a.test/story/1") == "http://a.test/story/1"
    # another domain's pages are not looked at
    assert index.nearest("b.test", near, "http://b.test/1") is None
    # other stories are pages of their own
    for n in range(2, 30):
        assert index.nearest("a.test", print_of(article(n)), f"http://a.test/story/{n}") is None
    # a fingerprint 4 bits away is not within 3
    far = story ^ 0b1111
    assert index.nearest("a.test", far, "http://a.test/far") is None
    assert NearIndex(redis_client, "t:near:", 0).nearest("a.test", story ^ 1, "http://x") is None


def test_a_block_keeps_its_newest_fingerprints_only(redis_client):
    """The cost a page is bounded: a block shared by many pages keeps the newest."""
    index = NearIndex(redis_client, "t:near:", 3)
    shared = 0xABCD << 48  # the same first block, the rest far apart
    rng = random.Random(5)
    prints = [shared | rng.getrandbits(48) for _ in range(BLOCK_KEPT + 5)]
    for n, each in enumerate(prints):
        index.nearest("a.test", each, f"http://a.test/{n}")
    field = b"b\x00" + (0xABCD).to_bytes(2, "big")
    kept = redis_client.hget("t:near:a.test", field)
    assert len(kept) == 8 * BLOCK_KEPT
    assert kept == b"".join(p.to_bytes(8, "big") for p in prints[-BLOCK_KEPT:])


def test_a_fingerprint_no_block_keeps_has_its_url_gone(redis_client):
    """A domain's hash is bounded by its blocks, not by its pages."""
    index = NearIndex(redis_client, "t:near:", 3)
    rng = random.Random(7)
    spread: list[int] = []  # 16-bit values at least 4 bits from each other
    while len(spread) < 2 * BLOCK_KEPT + 1:
        value = rng.getrandbits(16)
        if all(distance(value, other) >= 4 for other in spread):
            spread.append(value)

    def print_of_blocks(b0: int, b1: int, b2: int, b3: int) -> int:
        return (b0 << 48) | (b1 << 32) | (b2 << 16) | b3

    first = print_of_blocks(0xAAAA, 0xBBBB, 0xCCCC, spread[0])
    assert index.nearest("a.test", first, "http://a.test/first") is None
    # newer pages that share its first three blocks push it out of those, and
    # newer ones that share its last push it out of that one
    for n in range(BLOCK_KEPT):
        later = print_of_blocks(0xAAAA, 0xBBBB, 0xCCCC, spread[1 + n])
        assert index.nearest("a.test", later, f"http://a.test/a{n}") is None
    key = b"u" + first.to_bytes(8, "big")
    assert redis_client.hexists("t:near:a.test", key)  # its last block still keeps it
    for n in range(BLOCK_KEPT):
        other = spread[1 + BLOCK_KEPT + n]
        later = print_of_blocks(other, other, other, spread[0])
        assert index.nearest("a.test", later, f"http://a.test/b{n}") is None
    assert not redis_client.hexists("t:near:a.test", key)
    urls = [k for k in redis_client.hkeys("t:near:a.test") if k.startswith(b"u")]
    assert len(urls) == 2 * BLOCK_KEPT


def test_near_duplicates_are_marked_by_default_and_dropped_by_setting(redis_url):
    settings = {"REDIS_URL": redis_url, "CONTENT_DUPLICATES": "drop"}
    marking = checks(settings)
    output = [{"title": "Story 1"}, Request("http://a.test/story/2")]
    assert run(marking, response("http://a.test/story/1", article(1)), output) == output
    # on another host of the domain (a www. mirror) with a banner: marked, links kept
    mirror = article(1, extra="You are reading a mirror")
    items = [{"title": "Story 1"}, Request("http://a.test/story/2")]
    got = run(marking, response("http://www.a.test/story/1", mirror), items)
    assert got == items  # the same two, the item marked
    assert items[0] == {"title": "Story 1", "near_duplicate_of": "http://a.test/story/1"}
    assert marking[0].stats.get_value("duplicates/near_pages") == 1
    assert marking[0].stats.get_value("duplicates/near_items_marked") == 1
    # a small page is never a near duplicate: one word is much of what it says
    small = b"<html><body><p>Item 1 of the shop</p></body></html>"
    run(marking, response("http://a.test/item/1", small), [])
    again = run(marking, response("http://a.test/item/2", small.replace(b"1", b"2")), [{"i": 2}])
    assert again == [{"i": 2}]
    assert marking[0].stats.get_value("duplicates/near_too_few_words") == 2

    dropping = checks({**settings, "CONTENT_NEAR_DUPLICATES": "drop"})
    other = article(1, extra="recommended: story 7")
    assert run(dropping, response("http://a.test/story/1?from=7", other), items) == []
    assert dropping[0].stats.get_value("duplicates/links_dropped") == 1
    off = checks({**settings, "CONTENT_NEAR_DUPLICATES": "off"})
    third = article(1, extra="recommended: story 8")
    assert run(off, response("http://a.test/story/1?from=8", third), [{"t": 1}]) == [{"t": 1}]


@pytest.mark.unit
def test_a_pages_words_are_its_texts_runs_of_word_characters_lowered():
    from extensions.spidermiddlewares.nearduplicates import TEXT, WORD

    pages = sorted(PYTHON_DOCS.rglob("*.html"))[:40]
    bodies = [path.read_bytes() for path in pages] + [article(n) for n in range(5)]
    bodies.append("<p>Ünïcode WORDS, snake_case and 42 \u2013 «quoted»</p>".encode())
    for body in bodies:
        stable = stable_text(body)
        assert words(stable) == set(WORD.findall(b" ".join(TEXT.findall(stable)).lower()))
