"""``scrapy crawl``, checking the settings and Redis first: a bad setting (each
one line naming it, its value and what is allowed), an unreachable Redis, or a
start URL key a Redis Cluster cannot hold with the spider's other keys is a
clear message and exit status 1, not a traceback from deep inside the engine."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy.commands.crawl import Command as ScrapyCrawlCommand
from scrapy.spiderloader import get_spider_loader

from extensions import compat, connection, installed
from extensions.exceptions import ConfigError, RedisUnavailable
from extensions.keys import SpiderKeys

if TYPE_CHECKING:
    import argparse

    from scrapy.settings import Settings

logger = logging.getLogger(__name__)


def _uses_redis(settings: Settings) -> bool:
    addons = settings.getdict("ADDONS")
    return any("extensions.addon" in str(path) for path in addons) or str(
        settings.get("SCHEDULER", "")
    ).startswith("extensions.")


class Command(ScrapyCrawlCommand):
    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        assert self.settings is not None
        if len(args) == 1 and _uses_redis(self.settings):
            settings = self.settings.copy()
            try:
                spidercls = get_spider_loader(settings).load(args[0])
            except KeyError:
                return super().run(args, opts)  # Scrapy's own command reports it
            spidercls.update_settings(settings)
            try:
                settings = installed.effective(settings)  # the add-on checks every setting
                keys = SpiderKeys.from_settings(
                    args[0], settings, getattr(spidercls, "redis_key", None)
                )
                server = connection.from_settings(settings)
                foreign = compat.foreign_state(server, keys)
                server.close()
                if foreign:
                    raise ConfigError("\n".join(foreign))
            except (ConfigError, RedisUnavailable, ValueError) as exc:
                for line in str(exc).splitlines():
                    logger.critical("%s", line)
                self.exitcode = 1
                return
        super().run(args, opts)
