"""Settings read from the environment in any project that uses the add-on.

Container images, scrapyd nodes and a shell's ``REDIS_URL=... scrapy seed`` pass
connections and per-deployment switches as environment variables. A variable
counts where the project's settings leave the setting unset: ``settings.py``
wins over the environment, and ``-s NAME=VALUE`` over both, as a Scrapy user
expects of a value written down against one given at run time.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from scrapy.settings import SETTINGS_PRIORITIES

if TYPE_CHECKING:
    from collections.abc import Mapping

    from scrapy.settings import BaseSettings

#: the settings a variable of the same name sets
names = (
    "REDIS_URL",
    "REDIS_CLUSTER",  # True: REDIS_URL is a node of a Redis Cluster
    "MONGO_URI",
    "MONGO_DATABASE",
    "ITEMS_DIR",
    "MAX_IDLE_TIME_BEFORE_CLOSE",
    "METRICS_PORT",
    "DENY_PRIVATE_NETWORKS",  # True in the container images
    "RENDER_ENABLED",  # True in the render image: this node renders (a browser found)
    "RENDER_BROWSER",
    # the web console (scrapy console): where it listens and who may log in
    "CONSOLE_BIND",
    "CONSOLE_USER",
    "CONSOLE_PASSWORD",
    "CONSOLE_USERS",  # JSON: {"name": {"password": HASH, "role": "admin" or "read"}}
    "CONSOLE_SECRET",  # the same on every replica, so a login holds across them
)

#: above the add-on's defaults, below the project's settings.py
PRIORITY = SETTINGS_PRIORITIES["addon"] + 1


def apply(settings: BaseSettings, environ: Mapping[str, str] | None = None) -> None:
    """Set each of ``names`` that the environment has and the project left unset."""
    env = os.environ if environ is None else environ
    for name in names:
        if name in env and (settings.getpriority(name) or 0) < SETTINGS_PRIORITIES["project"]:
            settings.set(name, env[name], PRIORITY)


def values(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Those of ``names`` the environment has: for a project's settings.py that
    reads them itself (the bundled one), as plain project settings."""
    env = os.environ if environ is None else environ
    return {name: env[name] for name in names if name in env}
