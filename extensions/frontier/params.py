"""Query parameters learned per host, for the cluster: the ones that never
change a host's pages (``sort=``, ``view=``, a ``ref=`` no list names) are
dropped from its URLs by every node's normalizer chain once enough pairs of
fetched pages said so.

The evidence comes with each page's content digest (the duplicates middleware,
``spidermiddlewares/duplicates.py``): for each parameter of a fetched URL, the
page is compared with what the URL without that parameter, or with another
value of it, gave (``scripts/learn_params.lua``). ``URL_LEARN_PAIRS`` pairs with
equal content, and none that differed, make the parameter learned; one pair that
differs undoes it for good, so a parameter that changed a page once is never
dropped. The evidence costs a host at most ``PAIRS_KEPT`` fields for an hour
after its last page; the decisions stay (a few per host).

``LearnedParametersNormalizer`` (in ``URL_NORMALIZERS_BASE``) holds every
decision of the crawl in the node: read once when the node opens, then from the
stream ``NAME:params_learned`` every second.
"""

from __future__ import annotations

import hashlib
import logging
from collections import Counter
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import redis
from scrapy import signals
from twisted.internet import task

from extensions import connection
from extensions.frontier.redisops import fields, load_script, run_named
from extensions.keys import SpiderKeys
from extensions.signals import params_learned
from extensions.urlnorm.normalizers import ParameterSet, drop_query_parameters, query_name

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings

logger = logging.getLogger(__name__)

PAIRS_KEPT = 64  # evidence fields a host keeps at most
EVIDENCE_TTL_MS = 3_600_000  # the evidence of a host no page came from for an hour goes
PARAMETERS_PER_URL = 8  # parameters of one URL looked at, at most
NAME_MAX = 64  # characters: a longer parameter name is never learned
POLL = 1.0  # seconds between looks at the decisions other nodes made


def _h(text: str, size: int) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogateescape"), digest_size=size).digest()


def evidence_items(url: str) -> tuple[bytes, list[bytes | str]] | None:
    """The page's own 8 bytes and, per parameter, (sibling, name, value) for
    learn_params.lua; None for a URL without parameters."""
    base, mark, rest = url.partition("?")
    if not mark:
        return None
    pairs = [pair for pair in rest.partition("#")[0].split("&") if pair]
    if not pairs:
        return None
    items: list[bytes | str] = []
    names = [query_name(pair) for pair in pairs]
    counts = Counter(names)  # (a hostile URL may hold a thousand pairs)
    seen: set[str] = set()
    for n, (pair, name) in enumerate(zip(pairs, names, strict=True)):
        if counts[name] > 1 or not name or len(name) > NAME_MAX or "\0" in name:
            continue  # a name twice, or none: no pair says anything of it alone
        seen.add(name)
        sibling = base + "?" + "&".join(pairs[:n] + pairs[n + 1 :])
        items += [_h(sibling, 8), name, _h(pair.partition("=")[2], 4)]
        if len(seen) >= PARAMETERS_PER_URL:
            break
    return _h(base + "?" + "&".join(pairs), 8), items


class ParameterLearning:
    """Adds a fetched page's evidence, for its host."""

    def __init__(self, server: redis.Redis, keys: SpiderKeys, needed: int):
        self.server = server
        self.keys = keys
        self.needed = needed
        self._script = server.register_script(load_script("learn_params"))

    def learn(self, url: str, digest: bytes) -> dict[str, Any] | None:
        """What the page's pairs changed ({learned, undone, bad}), or None for a
        URL without parameters. Raises redis.RedisError."""
        result = self._run(url, digest, None)
        return None if result is None else self.read(result)

    def queue(self, url: str, digest: bytes, pipe: Any) -> bool:
        """``learn``'s script queued on ``pipe`` (``read`` takes its answer), or
        False for a URL without parameters: nothing queued."""
        return self._run(url, digest, pipe) is not None

    def _run(self, url: str, digest: bytes, pipe: Any) -> Any:
        evidence = evidence_items(url)
        if evidence is None:
            return None
        own, items = evidence
        try:
            host = urlsplit(url).hostname or ""
        except ValueError:
            return None
        if not host:
            return None
        key = self.keys.params(host)
        return run_named(
            self._script,
            {"decisions": key, "pairs": key + ":pairs", "hosts": self.keys.params_hosts,
             "changes": self.keys.params_learned},
            {"host": host, "digest": digest, "self": own, "needed": self.needed,
             "cap": PAIRS_KEPT, "ttl": EVIDENCE_TTL_MS},
            pipe,
            items=items,
        )  # fmt: skip

    @staticmethod
    def read(result: Any) -> dict[str, Any]:
        answer = fields(result)
        return {
            "learned": [connection.text(n) for n in answer["learned"]],
            "undone": [connection.text(n) for n in answer["undone"]],
            "bad": int(answer["bad"]),
        }


def learned_of(decisions: dict[Any, Any], needed: int) -> frozenset[str]:
    """The parameters a host's decisions say to drop."""
    dropped = set()
    for name, state in decisions.items():
        try:
            if int(state) >= needed:
                dropped.add(connection.text(name))
        except (TypeError, ValueError):
            continue  # not one a node writes
    return frozenset(dropped)


class LearnedParametersNormalizer:
    """Drops from a URL the parameters learned for its host (nothing until the
    node opens a crawl with ``URL_LEARN_PARAMETERS``)."""

    def __init__(self, needed: int = 3):
        self.needed = needed
        self.by_host: dict[str, ParameterSet] = {}
        self.server: redis.Redis | None = None
        self.keys: SpiderKeys | None = None
        self.health: Any = None
        self.crawler: Crawler | None = None
        self._loop: task.LoopingCall | None = None
        self._last = "0-0"

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> LearnedParametersNormalizer:
        return cls(settings.getint("URL_LEARN_PAIRS"))

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> LearnedParametersNormalizer:
        normalizer = cls.from_settings(crawler.settings)
        if crawler.settings.getbool("URL_LEARN_PARAMETERS"):
            normalizer.crawler = crawler  # Redis is asked when the spider opens
            crawler.signals.connect(normalizer.spider_opened, signal=signals.spider_opened)
            crawler.signals.connect(normalizer.spider_closed, signal=signals.spider_closed)
            crawler.signals.connect(normalizer.heard, signal=params_learned)
        return normalizer

    def heard(self, host: str, learned: list[str], undone: list[str]) -> None:
        """What this node learned itself, in use at once."""
        known = self.by_host.get(host)
        names = set(known.names) if known is not None else set()
        self._set(host, frozenset((names | set(learned)) - set(undone)))

    def spider_opened(self, spider: Any) -> None:
        assert self.crawler is not None
        self.server = connection.client_for(self.crawler)
        self.health = connection.health_for(self.crawler)
        self._safely(self._open)
        self._loop = task.LoopingCall(self._safely, self._look)
        self._loop.start(POLL, now=False)

    def _look(self) -> None:
        if self.keys is None:
            self._open()  # Redis was away when the spider opened
        else:
            self.poll()

    def _open(self) -> None:
        assert self.crawler is not None
        self.keys = SpiderKeys.for_crawler(self.crawler)
        self.load()

    def spider_closed(self, spider: Any) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()

    def _safely(self, look: Any) -> None:
        try:
            look()
        except redis.RedisError as exc:
            if self.health is not None:
                self.health.failed(exc)  # the decisions known so far stay in use

    def normalize(self, url: str) -> str:
        if not self.by_host or "?" not in url:
            return url
        try:
            host = urlsplit(url).hostname or ""
        except ValueError:
            return url
        dropped = self.by_host.get(host)
        return drop_query_parameters(url, dropped) if dropped else url

    def load(self) -> None:
        """Every decision of the crawl, and the stream's position. Raises redis.RedisError."""
        if self.server is None or self.keys is None:
            return
        last = self.server.xrevrange(self.keys.params_learned, count=1)
        self._last = connection.text(last[0][0]) if last else "0-0"
        hosts = [connection.text(h) for h in self.server.smembers(self.keys.params_hosts)]
        for start in range(0, len(hosts), 1000):
            chunk = hosts[start : start + 1000]
            pipe = self.server.pipeline(transaction=False)
            for host in chunk:
                pipe.hgetall(self.keys.params(host))
            for host, decisions in zip(chunk, pipe.execute(), strict=True):
                self._set(host, learned_of(decisions, self.needed))

    def poll(self) -> int:
        """Decisions made since the last look; how many. Raises redis.RedisError."""
        if self.server is None or self.keys is None:
            return 0
        answer: Any = self.server.xread({self.keys.params_learned: self._last}, count=1000)
        changed = set()
        for _stream, entries in answer or []:
            for entry_id, entry in entries:
                self._last = connection.text(entry_id)
                host = entry.get(b"h")
                if isinstance(host, bytes) and 0 < len(host) <= 253:
                    changed.add(connection.text(host))
        if not changed:
            return 0
        pipe = self.server.pipeline(transaction=False)
        for host in changed:
            pipe.hgetall(self.keys.params(host))
        for host, decisions in zip(changed, pipe.execute(), strict=True):
            self._set(host, learned_of(decisions, self.needed))
        return len(changed)

    def _set(self, host: str, dropped: frozenset[str]) -> None:
        if dropped:
            self.by_host[host] = ParameterSet(dropped, globs_allowed=False)  # names from the web
        else:
            self.by_host.pop(host, None)
