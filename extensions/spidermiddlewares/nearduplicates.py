"""Pages that differ in a few words: a SimHash of the words a page uses.

A content digest (``duplicates.py``) finds the same page under another URL.
The same article with a "recommended for you" block that differs per visit, a
mirror's banner, a counter: those differ in a few words, and their digests in
everything. Each such page's fingerprint is a 64-bit SimHash (Charikar; Manku,
Jain and Das Sarma for the lookup) of the distinct words its text uses, after
what changes on every load is masked; two pages whose fingerprints differ in at
most ``CONTENT_NEAR_DISTANCE`` bits are near duplicates. The fingerprint is the
``simhash`` library's (its value, tested), with the bit sums done by numpy at
once: half its CPU on a real page.

Looked up in Redis for the page's registered domain, where near duplicates are
(mirrors on ``www.`` and ``m.`` included): split in four 16-bit blocks, a
fingerprint within three bits of another shares at least one block with it
exactly, so a page is compared with the pages that share a block, at most
``BLOCK_KEPT`` a block (the newest): a bounded cost a page however large the
crawl. One round trip, one key a domain (``NAME:near:DOMAIN``), so a Redis
Cluster serves it.

A page of fewer than ``CONTENT_NEAR_MIN_WORDS`` distinct words is never a near
duplicate: on a page that small, one word (an item's number) is a large part
of what the page says.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from extensions import connection
from extensions.frontier.redisops import run_script

FINGERPRINT_BITS = 64
BLOCKS = 4  # the blocks a fingerprint is split in: DISTANCE_MAX + 1
DISTANCE_MAX = BLOCKS - 1  # what the blocks can find
BLOCK_KEPT = 8  # fingerprints kept a block (8 bytes each), the newest
URL_KEPT = 2000  # characters of the first URL kept with a fingerprint

TEXT = re.compile(rb">([^<]+)")  # a text node: what follows a tag's end
WORD = re.compile(rb"[\w\x80-\xff]+")  # non-ASCII letters too, as their UTF-8 bytes
# each byte lowered if it is one of WORD's, else a space
_WORD_BYTES = bytes(
    (c | 0x20 if 0x41 <= c <= 0x5A else c) if WORD.fullmatch(bytes([c])) else 0x20
    for c in range(256)
)


def feature_hash(feature: bytes) -> bytes:
    return hashlib.blake2b(feature, digest_size=8).digest()


def words(stable: bytes) -> set[bytes]:
    """The distinct words of a page's text (lower case, UTF-8): ``stable`` is the
    body with its scripts, styles, comments and moments removed
    (``duplicates.stable_text``)."""
    # WORD's runs, lowered, found by one translation and a split: 0.6 of the time
    return set(b" ".join(TEXT.findall(stable)).translate(_WORD_BYTES).split())


#: words whose hashes a node keeps (about 120 bytes each): a site's pages share
#: most of their words, and hashing them again was most of a fingerprint's cost
WORDS_KEPT = 100_000


def fingerprint(page_words: set[bytes], known: dict[bytes, bytes] | None = None) -> int:
    """The 64-bit SimHash of a page's distinct words: bit i is set when more
    than half of the words' hashes have it. ``known``: word hashes kept from the
    pages before (filled here, emptied at WORDS_KEPT)."""
    if not page_words:
        return 0
    # imported here: numpy costs every scrapy command a tenth of a second to load,
    # and only a node comparing pages needs it
    import numpy as np

    if known is None:
        hashes = [feature_hash(w) for w in page_words]
    else:
        if len(known) > WORDS_KEPT:
            known.clear()
        hashes = []
        for word in page_words:
            found = known.get(word)
            if found is None:
                found = known[word] = feature_hash(word)
            hashes.append(found)
    bits = np.frombuffer(b"".join(hashes), dtype=np.uint8)
    ones = np.unpackbits(bits).reshape(-1, FINGERPRINT_BITS).sum(axis=0)
    return int.from_bytes(np.packbits(ones * 2 > len(page_words)).tobytes(), "big")


def distance(a: int, b: int) -> int:
    return (a ^ b).bit_count()


# Keys: the domain's hash. Fields: 'b' .. table (1 byte) .. block (2 bytes) ->
# the fingerprints (8 bytes each, the newest BLOCK_KEPT) that have that block;
# 'u' .. fingerprint -> the first URL that had it (while a block keeps it).
# Arguments: fingerprint (8 bytes), URL, distance (bits), kept (a block).
# Returns the URL of the first page within the distance, or nil (then this
# page's fingerprint is kept).
NEAREST = """
local key, fp, url = KEYS[1], ARGV[1], ARGV[2]
local most, kept = tonumber(ARGV[3]), tonumber(ARGV[4])
local a1, a2 = struct.unpack('>I4I4', fp)
local function bits(x)
  local c = 0
  while x ~= 0 do x = bit.band(x, x - 1); c = c + 1 end
  return c
end
local fields, found = {}, {}
for t = 0, 3 do
  fields[t] = 'b' .. string.char(t) .. string.sub(fp, 2 * t + 1, 2 * t + 2)
  found[t] = redis.call('HGET', key, fields[t]) or ''
  local kept_here = found[t]
  for at = 1, #kept_here - 7, 8 do
    local other = string.sub(kept_here, at, at + 7)
    local b1, b2 = struct.unpack('>I4I4', other)
    local d = bits(bit.bxor(a1, b1))
    if d <= most then
      d = d + bits(bit.bxor(a2, b2))
      if d <= most then
        local first = redis.call('HGET', key, 'u' .. other)
        if first then return first end
      end
    end
  end
end
local dropped = {}
for t = 0, 3 do
  local value = found[t] .. fp
  if #value > 8 * kept then
    for at = 1, #value - 8 * kept, 8 do dropped[string.sub(value, at, at + 7)] = true end
    value = string.sub(value, -8 * kept)
  end
  redis.call('HSET', key, fields[t], value)
end
redis.call('HSETNX', key, 'u' .. fp, url)
-- a fingerprint no block keeps any more is never found again: its URL goes too,
-- so a domain's hash is bounded by its blocks, not by its pages
local function kept_in(value, other)
  local at = string.find(value, other, 1, true)
  while at do
    if (at - 1) % 8 == 0 then return true end
    at = string.find(value, other, at + 1, true)
  end
  return false
end
for other in pairs(dropped) do
  local anywhere = false
  for t = 0, 3 do
    local field = 'b' .. string.char(t) .. string.sub(other, 2 * t + 1, 2 * t + 2)
    if kept_in(redis.call('HGET', key, field) or '', other) then anywhere = true; break end
  end
  if not anywhere then redis.call('HDEL', key, 'u' .. other) end
end
return nil
"""


class NearIndex:
    """The crawl's fingerprints in Redis, a hash a registered domain."""

    def __init__(self, server, prefix: str, distance_bits: int):
        self.prefix = prefix
        self.distance = distance_bits
        self._nearest = server.register_script(NEAREST)

    def nearest(self, domain: str, print_: int, url: str) -> str | None:
        """The URL of the first page of ``domain`` within the distance of
        ``print_``; None, and ``url`` is kept as its page, when there is none.
        Raises redis.RedisError."""
        return self.near_of(self.ask(None, domain, print_, url))

    def ask(self, pipe: Any, domain: str, print_: int, url: str) -> Any:
        """``nearest``'s script, run now (``pipe`` None) or queued on ``pipe``;
        ``near_of`` reads its answer."""
        return run_script(
            self._nearest,
            [f"{self.prefix}{domain}"],
            [print_.to_bytes(8, "big"), url[:URL_KEPT], self.distance, BLOCK_KEPT],
            pipe,
        )

    @staticmethod
    def near_of(answer: Any) -> str | None:
        return connection.text(answer) if answer is not None else None
