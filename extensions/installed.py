"""The stack's components read their settings as the add-on installed them (its
defaults, from ``defaults.py``, at the add-on's priority), without defaults of
their own: one built where the add-on is not says so in one line."""

from __future__ import annotations

from typing import TYPE_CHECKING

from extensions.exceptions import ConfigError

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

ADDON = "extensions.addon.DistributedAddon"
#: a setting only the add-on installs: where it is missing, so are the others
MARKER = "FRONTIER_FETCH_BATCH"


def require_addon(settings: BaseSettings, component: str) -> None:
    """Raise ConfigError, naming ``component`` and what to do, unless the add-on
    installed the stack's settings."""
    if settings.getpriority(MARKER) is None:
        raise ConfigError(
            f'{component} needs the add-on: add ADDONS = {{"{ADDON}": 0}} to the settings'
        )
