"""Sizing and bit positions of the Bloom-filter dupefilter (``DUPEFILTER_MODE = "bloom"``).

The filter is a bitmap in Redis strings ``NAME:bloom:0`` ... ``NAME:bloom:N``,
sharded so that no key exceeds ``MAX_SHARD_BITS`` (Redis caps a string at
512 MB). Sized for ``DUPEFILTER_BLOOM_CAPACITY`` fingerprints at a false-positive
rate of ``DUPEFILTER_BLOOM_ERROR_RATE``: m = -n ln p / (ln 2)^2 bits and
k = m/n ln 2 bit positions per fingerprint, all in one shard (one shard per
check). A false positive means a new URL is taken as seen and not crawled;
the rate is the price of about 1.8 bytes per URL at 0.1 %.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MAX_SHARD_BITS = 2**32 - 1  # a Redis string holds at most 512 MB
DEFAULT_SHARD_BITS = 2**30  # 128 MB per key keeps each key easy to move and dump


@dataclass(frozen=True)
class BloomParams:
    capacity: int
    error_rate: float
    bits: int
    hashes: int
    shards: int
    shard_bits: int

    @classmethod
    def for_capacity(
        cls, capacity: int, error_rate: float, shard_bits: int = DEFAULT_SHARD_BITS
    ) -> BloomParams:
        if capacity < 1:
            raise ValueError("DUPEFILTER_BLOOM_CAPACITY must be at least 1")
        if not 0 < error_rate < 1:
            raise ValueError("DUPEFILTER_BLOOM_ERROR_RATE must be between 0 and 1")
        if not 0 < shard_bits <= MAX_SHARD_BITS:
            raise ValueError(f"a shard holds 1 to {MAX_SHARD_BITS} bits")
        bits = math.ceil(-capacity * math.log(error_rate) / math.log(2) ** 2)
        hashes = max(1, round(bits / capacity * math.log(2)))
        shards = math.ceil(bits / shard_bits)
        return cls(capacity, error_rate, shards * math.ceil(bits / shards), hashes, shards,
                   math.ceil(bits / shards))  # fmt: skip

    @property
    def bytes_per_entry(self) -> float:
        return self.bits / 8 / self.capacity

    def positions(self, fingerprint: bytes) -> tuple[int, list[int]]:
        """(shard, bit offsets) of a fingerprint of 16 or more bytes (double hashing)."""
        h1 = int.from_bytes(fingerprint[:8], "big")
        h2 = int.from_bytes(fingerprint[8:16], "big") | 1
        shard = h1 % self.shards
        base = h1 // self.shards
        return shard, [(base + i * h2) % self.shard_bits for i in range(self.hashes)]


def bloom_from_settings(settings) -> BloomParams | None:
    mode = settings.get("DUPEFILTER_MODE")
    if mode == "exact":
        return None
    if mode != "bloom":
        raise ValueError(f"DUPEFILTER_MODE must be 'exact' or 'bloom', not {mode!r}")
    return BloomParams.for_capacity(
        settings.getint("DUPEFILTER_BLOOM_CAPACITY"),
        settings.getfloat("DUPEFILTER_BLOOM_ERROR_RATE"),
    )
