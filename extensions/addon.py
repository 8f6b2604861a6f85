"""One add-on that turns the distributed stack on in any Scrapy project::

ADDONS = {"extensions.addon.DistributedAddon": 0}
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy.settings import SETTINGS_PRIORITIES

from extensions import capability, compat, config, connection, defaults, installed
from extensions.render import setup as render
from extensions.wire import install as wire

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

logger = logging.getLogger(__name__)

PIPELINE = "extensions.pipelines.itemstore.ItemStorePipeline"
METRICS = "extensions.observability.metrics.PrometheusMetrics"
GC_TUNING = "extensions.gctuning.GarbageCollectorTuning"
REMOTE_CONTROL = "scrapy.extensions.remote_control.RemoteControl"
# a task for a callback's output only where it waits, not Scrapy's CONCURRENT_ITEMS a response
OUTPUT_TASKS = "extensions.outputs.SpiderOutputTasks"
SCRAPY_RETRY = "scrapy.downloadermiddlewares.retry.RetryMiddleware"
SCRAPY_ROBOTSTXT = "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware"
ROBOTSTXT = "extensions.downloadermiddlewares.robotstxt.RobotsTxtMiddleware"
GATED_DOWNLOADER = "extensions.downloader.GatedDownloader"
# downloader middlewares, at scrapy-rotating-proxies' documented places; each
# switches itself off when not configured (no proxies, no rate, rotation off)
DOWNLOADER_MIDDLEWARES = {
    "extensions.downloadermiddlewares.retry.BackoffRetryMiddleware": 550,
    # above the retry middleware: it sees a refused address before a retry is planned
    "extensions.downloadermiddlewares.urlpolicy.UrlPolicyMiddleware": 560,
    # the last to hold a request back before it is sent (pacing slots, holds), and
    # the first after decompression to see an answer: a 429/503 or a ban page goes
    # back to wait with its host before the retry middleware or a callback sees it
    "extensions.downloadermiddlewares.pushback.PushbackMiddleware": 585,
    "extensions.downloadermiddlewares.politeness.ClusterPolitenessMiddleware": 590,
    "extensions.downloadermiddlewares.proxies.RotatingProxyMiddleware": 610,
    "extensions.downloadermiddlewares.useragents.RotatingUserAgentMiddleware": 615,
    "extensions.downloadermiddlewares.proxies.BanDetectionMiddleware": 620,
    # after every middleware that sets a header (Scrapy's stats at 850, cache at 900)
    "extensions.downloadermiddlewares.botauth.BotAuthMiddleware": 950,
    # the last to see an answer before the spider: which URL had its content first
    "extensions.downloadermiddlewares.duplicates.ContentDuplicatesLookup": 530,
}
# closest to the spider: counts what its callbacks yield before anything else
SPIDER_MIDDLEWARES = {
    "extensions.spidermiddlewares.linklimit.LinkLimitMiddleware": 950,
    # before the link limit counts links a duplicate page will not follow
    "extensions.spidermiddlewares.duplicates.ContentDuplicatesMiddleware": 960,
    # what a page says of itself (meta robots): before the canonical's seen mark
    "extensions.spidermiddlewares.robotsmeta.RobotsMetaMiddleware": 958,
    "extensions.spidermiddlewares.usagesignals.UsageSignalsMiddleware": 957,
    # after the duplicates (which drop a repeated page's links): its mark stays
    "extensions.spidermiddlewares.canonical.CanonicalMiddleware": 955,
    # after the recrawl hash (a crawl id is not the page's content), before the rest
    "extensions.spidermiddlewares.crawlid.CrawlIdMiddleware": 980,
    # once a request has its crawl id, before any other middleware spends time on it
    "extensions.spidermiddlewares.sentlinks.SentLinksMiddleware": 970,
    # after Scrapy's DepthMiddleware (900): a scorer sees the request's depth
    "extensions.spidermiddlewares.scoring.ScoringMiddleware": 870,
    # after the meta robots (a nofollow link is no vote for its host)
    "extensions.spidermiddlewares.linkgraph.LinkGraphMiddleware": 860,
    # before Scrapy's UrlLengthMiddleware (800), so an over-long URL counts as a trap
    "extensions.spidermiddlewares.traps.TrapMiddleware": 850,
    # the last to see a callback's output (Scrapy's HttpErrorMiddleware is at 50)
    "extensions.gctuning.ResponseRelease": 25,
}


def _silent(*args: object) -> None:
    """Where a command only reads the settings, the crawler says it."""


def stack_middlewares(kind: str) -> dict[str, int]:
    """The stack's own ``kind`` ("downloader" or "spider") middlewares, then those
    the capability packages declare (``scrapy reparse`` turns the downloader's off)."""
    own = DOWNLOADER_MIDDLEWARES if kind == "downloader" else SPIDER_MIDDLEWARES
    return {**own, **capability.components(f"{kind}_middlewares")}


class DistributedAddon:
    #: whether update_settings logs what it did (off where a command only reads)
    announce = True

    def update_settings(self, settings: BaseSettings) -> None:
        # Every setting of the stack gets its default here, so `scrapy settings
        # --get NAME` shows it and a project overrides it as any Scrapy setting.
        installed.install_defaults(settings)
        self._delay_for_the_cluster(settings)
        if self.announce and settings.getint("CLOSESPIDER_PAGECOUNT") > 0:
            logger.info(
                "CLOSESPIDER_PAGECOUNT = %d stops this node, not the crawl: a cap for the "
                "whole crawl is scrapy seed NAME URL --crawl ID --budget N",
                settings.getint("CLOSESPIDER_PAGECOUNT"),
            )
        # an address's limit holds for the cluster when every node sees one answer;
        # DNS servers named are the shared resolver's (Twisted's reads resolv.conf)
        wanted = settings.getfloat("CLUSTER_IP_RATE") > 0 or bool(settings.getlist("DNS_SERVERS"))
        if wanted and (settings.getpriority("DNS_SHARED") or 0) <= SETTINGS_PRIORITIES["addon"]:
            settings.set("DNS_SHARED", True, "addon")
        compat.take_over(settings)  # SCHEDULER, DUPEFILTER_CLASS (scrapy-redis leftovers too)
        if not connection.set_by_project(settings, "DOWNLOADER"):
            settings.set("DOWNLOADER", GATED_DOWNLOADER, "addon")  # holds met at send time
        compat.warn_ignored(settings)
        self._close_doors(settings)
        # Added into the component dicts so a project's own components stay on.
        if PIPELINE not in settings["ITEM_PIPELINES"]:
            settings["ITEM_PIPELINES"][PIPELINE] = 900
        middlewares = settings["DOWNLOADER_MIDDLEWARES"]
        if "extensions.downloadermiddlewares.retry.BackoffRetryMiddleware" not in middlewares:
            middlewares[SCRAPY_RETRY] = None  # ours replaces it, at its place
        if ROBOTSTXT not in middlewares:
            middlewares[SCRAPY_ROBOTSTXT] = None  # ours mends it, at its place (100)
            middlewares[ROBOTSTXT] = 100
        for path, order in stack_middlewares("downloader").items():
            if path not in middlewares:
                middlewares[path] = order
        for path, order in stack_middlewares("spider").items():
            if path not in settings["SPIDER_MIDDLEWARES"]:
                settings["SPIDER_MIDDLEWARES"][path] = order
        if METRICS not in settings["EXTENSIONS"]:
            settings["EXTENSIONS"][METRICS] = 500  # off unless METRICS_PORT is set
        for extension in (GC_TUNING, OUTPUT_TASKS):
            if extension not in settings["EXTENSIONS"]:
                settings["EXTENSIONS"][extension] = 100
        for extension, order in capability.components("extensions").items():
            if extension not in settings["EXTENSIONS"]:
                settings["EXTENSIONS"][extension] = order
        render.install(settings)  # a render node: the browser's download handler
        wire.install(settings)  # HTTPS verified, sessions resumed, HTTP/2 by setting
        config.check(settings)  # a crawler never starts with a value it would choke on

    def _delay_for_the_cluster(self, settings: BaseSettings) -> None:
        """A project's ``DOWNLOAD_DELAY`` (Scrapy's template sets 1 s) meant one
        request a second at the site: it becomes the cluster's rate per host
        unless one is set, and no node waits it out on top of the cluster's pace
        (which would make N nodes N requests a second, each at a fraction of it)."""
        delay = settings.getfloat("DOWNLOAD_DELAY")
        if delay <= 0:
            return
        settings.set("DOWNLOAD_DELAY", 0, settings.getpriority("DOWNLOAD_DELAY") or "addon")
        say = logger.info if self.announce else _silent
        if connection.set_by_project(settings, "CLUSTER_HOST_RATE"):
            say(
                "DOWNLOAD_DELAY = %s s: CLUSTER_HOST_RATE = %s requests/s holds each host "
                "for the whole cluster instead; nodes add no delay of their own",
                delay, settings.getfloat("CLUSTER_HOST_RATE"),
            )  # fmt: skip
            return
        settings.set("CLUSTER_HOST_RATE", 1 / delay, "addon")
        say(
            "DOWNLOAD_DELAY = %s s holds for the whole cluster: each host gets at most "
            "%.3g requests/s from all nodes together (CLUSTER_HOST_RATE); nodes add no "
            "delay of their own",
            delay, 1 / delay,
        )  # fmt: skip

    @staticmethod
    def _close_doors(settings: BaseSettings) -> None:
        """Safe defaults for the open web; a project's own settings still win."""
        # Scrapy's 1 GiB cap lets one response take a node's memory.
        settings.set("DOWNLOAD_MAXSIZE", defaults.DOWNLOAD_MAXSIZE, "addon")
        # Scrapy 2.19's remote control runs Python sent over HTTP (token, loopback);
        # a crawler node has no use for it unless someone turns it on.
        settings.set("REMOTE_CONTROL_ENABLED", False, "addon")
        base = settings["EXTENSIONS_BASE"]
        if not settings.getbool("REMOTE_CONTROL_ENABLED") and REMOTE_CONTROL in base:
            # not even imported (Scrapy imports a component set to None too): its
            # aiohttp server is a tenth of a node's start
            del base[REMOTE_CONTROL]
        allowed = {s.lower() for s in settings.getlist("ALLOWED_SCHEMES", defaults.ALLOWED_SCHEMES)}
        handlers = settings["DOWNLOAD_HANDLERS"]
        for scheme in settings["DOWNLOAD_HANDLERS_BASE"]:
            if scheme not in allowed:
                handlers[scheme] = None  # file://, s3://, ftp://, data: cannot be fetched
