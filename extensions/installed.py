"""The stack's components read their settings as the add-on installed them (its
defaults, from ``defaults.py``, at the add-on's priority), without defaults of
their own: one built where the add-on is not says so in one line. The project's
commands install the same defaults before they read a setting."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import NotConfigured
from scrapy.utils.misc import load_object

from extensions import defaults, environment
from extensions.exceptions import ConfigError

if TYPE_CHECKING:
    from collections.abc import Callable

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


def with_defaults(settings: BaseSettings) -> BaseSettings:
    """A copy of ``settings`` with the defaults installed (``install_defaults``),
    for what reads them before the add-on has run."""
    copy = settings.copy()
    copy.frozen = False  # a frozen crawler's copy: this one is read, never applied
    install_defaults(copy)
    return copy


def install_defaults(settings: BaseSettings) -> None:
    """Every setting of ``defaults.py`` the project left unset, at the add-on's
    priority, and those the environment gives (``environment.py``) above it: a
    project's own value, or one from the command line, still wins."""
    environment.apply(settings)
    for name in dir(defaults):
        if name.isupper():
            settings.setdefault(name, getattr(defaults, name), "addon")


def effective(settings: Any) -> Any:
    """A copy of the project's settings with its add-ons applied, as a crawler
    would see them (the spider's custom settings aside). An add-on with an
    ``announce`` attribute is told to say nothing: the crawler says it once."""
    copy = settings.copy()
    for path in copy.getdict("ADDONS"):
        addon = load_object(path) if isinstance(path, str) else path
        instance = addon() if isinstance(addon, type) else addon
        if hasattr(instance, "announce"):
            instance.announce = False
        if hasattr(instance, "update_settings"):
            instance.update_settings(copy)
    return copy


def components_problem(
    settings: BaseSettings, name: str, example: str, kind_problem: Callable[[Any], str | None]
) -> str | None:
    """What is wrong with a ``{class path: order or None}`` setting, as Scrapy's
    ``*_MIDDLEWARES``: each order a whole number, each path loadable and what
    ``kind_problem`` (given the loaded object; None when it is fine) accepts.
    ``example`` is one valid entry, for the message."""
    value = settings.get(name) or {}
    if not isinstance(value, dict) and not hasattr(value, "copy_to_dict"):
        return f"must be a dict of class paths to orders, e.g. {{{example}}}"
    items = value.copy_to_dict() if hasattr(value, "copy_to_dict") else value
    for path, order in items.items():
        if order is None:
            continue
        if isinstance(order, bool) or not isinstance(order, int):
            return f"{path!r}: its order must be a whole number, or None to leave it out"
        try:
            component = load_object(path) if isinstance(path, str) else path
        except (ImportError, NameError, ValueError, AttributeError) as exc:
            return f"{path!r} cannot be loaded: {exc}"
        problem = kind_problem(component)
        if problem:
            return f"{path!r} {problem}"
    return None


def switched_off(component: type, reason: str) -> NotConfigured:
    """A NotConfigured to raise from ``component``'s ``from_crawler`` when a
    setting leaves it off: said at INFO in the component's own logger, where
    Scrapy would log a NotConfigured with a message as a WARNING at every start
    although nothing is wrong."""
    logging.getLogger(component.__module__).info("%s is off: %s", component.__name__, reason)
    return NotConfigured()
