"""The URL normalizer chain: every request a DistributedSpider queues (links,
start URLs, redirects, retries of its own) has its URL put through it once,
before the dupefilter and the frontier, so variants of one page are one URL.

``URL_NORMALIZERS`` (merged over ``URL_NORMALIZERS_BASE``, as Scrapy merges its
middlewares) names the normalizers in order; ``None`` leaves one out and
``URL_NORMALIZE_ENABLED = False`` turns the chain off. ``scrapy normalize
URL...`` prints what the chain makes of a URL and which step did what.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from scrapy.utils.conf import build_component_list
from scrapy.utils.misc import load_object

from extensions.installed import components_problem
from extensions.runtime import state_of
from extensions.urlnorm.normalizers import host_rules_problem

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

logger = logging.getLogger(__name__)


class UrlNormalizer(Protocol):
    def normalize(self, url: str) -> str: ...


@dataclass(frozen=True)
class Step:
    """What one normalizer made of the URL it was given."""

    name: str
    before: str
    after: str


def step_name(normalizer: object) -> str:
    return type(normalizer).__name__.removesuffix("Normalizer") or type(normalizer).__name__


class UrlNormalizerChain:
    def __init__(self, normalizers: list[UrlNormalizer]):
        self.normalizers = normalizers
        self.names = [step_name(n) for n in normalizers]

    @classmethod
    def from_settings(
        cls, settings: BaseSettings, crawler: Any = None
    ) -> UrlNormalizerChain | None:
        """The chain the settings name; None when it is off or empty. With a
        crawler, a normalizer that has ``from_crawler`` is built with it."""
        if not settings.getbool("URL_NORMALIZE_ENABLED", True):
            return None
        normalizers = []
        for path in build_component_list(settings.getwithbase("URL_NORMALIZERS")):
            cls_ = load_object(path)
            if crawler is not None and hasattr(cls_, "from_crawler"):
                normalizers.append(cls_.from_crawler(crawler))
                continue
            builder = getattr(cls_, "from_settings", None)
            normalizers.append(builder(settings) if builder else cls_())
        return cls(normalizers) if normalizers else None

    def normalize(self, url: str) -> str:
        for normalizer in self.normalizers:
            url = normalizer.normalize(url)
        return url

    def explain(self, url: str) -> list[Step]:
        """The steps that changed ``url``, in order."""
        steps = []
        for name, normalizer in zip(self.names, self.normalizers, strict=True):
            after = normalizer.normalize(url)
            if after != url:
                steps.append(Step(name, url, after))
            url = after
        return steps


class Normalizing:
    """The chain as a node runs it: counted in stats, and a normalizer that
    fails on a URL leaves it as it was (counted, logged once per step)."""

    def __init__(self, chain: UrlNormalizerChain, stats: Any):
        self.chain = chain
        self.stats = stats
        self._failed_said: set[str] = set()

    def __call__(self, url: str) -> str:
        for name, normalizer in zip(self.chain.names, self.chain.normalizers, strict=True):
            try:
                after = normalizer.normalize(url)
                if not isinstance(after, str) or not after:
                    raise TypeError(f"returned {after!r:.80}, not a URL")
            except Exception as exc:  # a project's normalizer must not lose the request
                self.stats.inc_value(f"urlnorm/failed/{name}")
                if name not in self._failed_said:
                    self._failed_said.add(name)
                    logger.error("URL normalizer %s failed on %.200s: %s", name, url, exc)
                continue
            if after != url:
                self.stats.inc_value(f"urlnorm/changed/{name}")
                url = after
        return url


def normalizing_for(crawler: Any) -> Normalizing | None:
    """The chain a node runs on what it queues, or None when it is off: one per
    crawler, whoever asks first builds it."""

    def build() -> Normalizing | None:
        chain = UrlNormalizerChain.from_settings(crawler.settings, crawler)
        return Normalizing(chain, crawler.stats) if chain is not None else None

    # (None is kept too: the chain is off, and is not built again)
    return state_of(crawler, Normalizing, build)


def normalizers_problem(settings: BaseSettings, name: str) -> str | None:
    """What is wrong with URL_NORMALIZERS (or its base): {class path: order or
    None}, each class loadable with a ``normalize`` method (``config.py``)."""
    return components_problem(
        settings, name, '"myproject.urls.Mine": 500',
        lambda normalizer: None if callable(getattr(normalizer, "normalize", None))
        else "has no normalize(url) method",
    )  # fmt: skip


def host_rules_setting_problem(settings: BaseSettings, name: str) -> str | None:
    try:
        rules = settings.getdict(name)  # a dict, or its JSON from the command line
    except ValueError as exc:
        return f"must be a dict (or its JSON): {exc}"
    return host_rules_problem(rules)


def parameters_problem(settings: BaseSettings, name: str) -> str | None:
    names = settings.getlist(name, [])
    if not all(isinstance(n, str) and n.strip() for n in names):
        return 'must be a list of query parameter names or globs, e.g. ["ref", "utm_*"]'
    return None


#: the chain's settings and their checks (``config.py`` runs them at start)
SETTING_CHECKS = {
    "URL_NORMALIZERS_BASE": normalizers_problem,
    "URL_NORMALIZERS": normalizers_problem,
    "URL_TRACKING_PARAMETERS": parameters_problem,
    "URL_DROP_PARAMETERS": parameters_problem,
    "URL_SESSION_PARAMETERS": parameters_problem,
    "URL_HOST_RULES": host_rules_setting_problem,
}
