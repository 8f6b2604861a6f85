"""The fingerprints a node already sent to the shared dupefilter."""

from __future__ import annotations


class SentFingerprints:
    """Fingerprints this node already wrote to the shared dupefilter.

    Most links a crawl extracts were seen before, many by this very node; those
    are dropped here, before being serialized and sent to Redis to be dropped
    there. Two generations of at most ``size`` bound the memory; a fingerprint
    forgotten only costs the trip to Redis it would have cost anyway.
    """

    def __init__(self, size: int):
        self.size = size
        self._current: set[bytes | str] = set()
        self._previous: set[bytes | str] = set()

    def add(self, fingerprint: bytes | str) -> bool:
        """Remember ``fingerprint``; False if it was sent before."""
        if fingerprint in self._current or fingerprint in self._previous:
            return False
        if self.size <= 0:
            return True
        if len(self._current) >= self.size:
            self._previous, self._current = self._current, set()
        self._current.add(fingerprint)
        return True

    def clear(self) -> None:
        self._current, self._previous = set(), set()
