"""One add-on that turns the distributed stack on in any Scrapy project::

ADDONS = {"extensions.addon.DistributedAddon": 0}
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

PIPELINE = "extensions.pipelines.ItemStorePipeline"
METRICS = "extensions.metrics.PrometheusMetrics"
SCRAPY_RETRY = "scrapy.downloadermiddlewares.retry.RetryMiddleware"
# downloader middlewares, at scrapy-rotating-proxies' documented places; each
# switches itself off when not configured (no proxies, no rate, rotation off)
DOWNLOADER_MIDDLEWARES = {
    "extensions.retry.BackoffRetryMiddleware": 550,
    "extensions.politeness.ClusterPolitenessMiddleware": 590,
    "extensions.proxies.RotatingProxyMiddleware": 610,
    "extensions.useragents.RotatingUserAgentMiddleware": 615,
    "extensions.proxies.BanDetectionMiddleware": 620,
}


class DistributedAddon:
    def update_settings(self, settings: BaseSettings) -> None:
        settings.set("SCHEDULER", "extensions.scheduler.DistributedScheduler", "addon")
        settings.set("DUPEFILTER_CLASS", "extensions.dupefilter.RedisDupeFilter", "addon")
        # Added into the component dicts so a project's own components stay on.
        if PIPELINE not in settings["ITEM_PIPELINES"]:
            settings["ITEM_PIPELINES"][PIPELINE] = 900
        middlewares = settings["DOWNLOADER_MIDDLEWARES"]
        if "extensions.retry.BackoffRetryMiddleware" not in middlewares:
            middlewares[SCRAPY_RETRY] = None  # ours replaces it, at its place
        for path, order in DOWNLOADER_MIDDLEWARES.items():
            if path not in middlewares:
                middlewares[path] = order
        if METRICS not in settings["EXTENSIONS"]:
            settings["EXTENSIONS"][METRICS] = 500  # off unless METRICS_PORT is set
