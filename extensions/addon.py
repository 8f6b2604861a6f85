"""One add-on that turns the distributed stack on in any Scrapy project::

ADDONS = {"extensions.addon.DistributedAddon": 0}
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

PIPELINE = "extensions.pipelines.ItemStorePipeline"
SCRAPY_RETRY = "scrapy.downloadermiddlewares.retry.RetryMiddleware"
RETRY = "extensions.retry.BackoffRetryMiddleware"


class DistributedAddon:
    def update_settings(self, settings: BaseSettings) -> None:
        settings.set("SCHEDULER", "extensions.scheduler.DistributedScheduler", "addon")
        settings.set("DUPEFILTER_CLASS", "extensions.dupefilter.RedisDupeFilter", "addon")
        # Added into the component dicts so a project's own components stay on.
        if PIPELINE not in settings["ITEM_PIPELINES"]:
            settings["ITEM_PIPELINES"][PIPELINE] = 900
        middlewares = settings["DOWNLOADER_MIDDLEWARES"]
        if RETRY not in middlewares:
            middlewares[SCRAPY_RETRY] = None
            middlewares[RETRY] = 550  # where Scrapy's own retry middleware sits
