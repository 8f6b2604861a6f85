"""One add-on that turns the distributed stack on in any Scrapy project::

ADDONS = {"extensions.addon.DistributedAddon": 0}
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

PIPELINE = "extensions.pipelines.ItemStorePipeline"


class DistributedAddon:
    def update_settings(self, settings: BaseSettings) -> None:
        settings.set("SCHEDULER", "extensions.scheduler.DistributedScheduler", "addon")
        settings.set("DUPEFILTER_CLASS", "extensions.dupefilter.RedisDupeFilter", "addon")
        # Added into the component dict so a project's own pipelines stay on.
        if PIPELINE not in settings["ITEM_PIPELINES"]:
            settings["ITEM_PIPELINES"][PIPELINE] = 900
