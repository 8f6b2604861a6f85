"""What the project's ``scrapy`` commands share: the spider's keys, a Redis
client that fails with one line, and a quiet base class."""

from __future__ import annotations

import functools
import os
import sys
from typing import TYPE_CHECKING, Any, ClassVar

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError
from scrapy.spiderloader import get_spider_loader

from extensions import connection, installed
from extensions.exceptions import RedisUnavailable
from extensions.keys import SpiderKeys

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable

    import redis
    from scrapy.settings import Settings


def spider_keys(settings: Settings, name: str) -> SpiderKeys:
    """The keys of spider ``name``; UsageError if the project has no such spider."""
    loader = get_spider_loader(settings)
    try:
        spidercls = loader.load(name)
    except KeyError:
        known = ", ".join(sorted(loader.list())) or "none"
        raise UsageError(f"no spider named {name!r} in this project (spiders: {known})") from None
    spider_settings = settings.copy()
    spidercls.update_settings(spider_settings)  # custom_settings may name the start key's type
    try:
        return SpiderKeys.from_settings(
            name, spider_settings, getattr(spidercls, "redis_key", None)
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def redis_for_command(settings: Settings) -> redis.Redis:
    """A client for the project's Redis, named on standard error (credentials
    masked) so a user sees which crawl a command touched; a Redis that cannot be
    reached ends the command with one line."""
    try:
        server = connection.from_settings(settings)
    except RedisUnavailable as exc:
        raise SystemExit(f"error: {exc}") from None
    cluster = " (Redis Cluster)" if settings.getbool("REDIS_CLUSTER") else ""
    print(f"Redis {connection.mask_url(connection.redis_url(settings))}{cluster}",
          file=sys.stderr, flush=True)  # fmt: skip
    return server


def _quiet_on_closed_pipe(run: Callable[..., None]) -> Callable[..., None]:
    """``run``, ending quietly when its reader went away (``scrapy status | head``),
    as a Unix command does, instead of with a BrokenPipeError traceback."""

    @functools.wraps(run)
    def wrapper(self: ScrapyCommand, *args: Any, **kwargs: Any) -> None:
        try:
            run(self, *args, **kwargs)
            sys.stdout.flush()
        except BrokenPipeError:
            # what is still buffered goes nowhere, not into a second error at exit
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            self.exitcode = 1

    return wrapper


class ProjectCommand(ScrapyCommand):
    """A quick command of the project: no crawler process, no Scrapy log noise,
    and the stack's settings as a crawler would have them (the add-on's defaults
    under the project's values)."""

    requires_project = True
    requires_crawler_process = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "run" in cls.__dict__:
            cls.run = _quiet_on_closed_pipe(cls.__dict__["run"])  # type: ignore[method-assign]

    def process_options(self, args: list[str], opts: argparse.Namespace) -> None:
        super().process_options(args, opts)
        assert self.settings is not None
        installed.install_defaults(self.settings)


def serve_web_app(settings: Settings, build: Callable[[Settings], Any], said: str,
                  bind: str, port: int) -> None:  # fmt: skip
    """Log as a command's server does, build its aiohttp application and serve
    it until Ctrl-C (``scrapy console``, ``scrapy api``); ``said`` is its line."""
    import logging

    from aiohttp import web

    logging.basicConfig(
        level=settings.get("LOG_LEVEL", "INFO"),
        format="%(asctime)s [%(name)s] %(levelname)s: %(message)s",
    )
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    app = build(settings)
    print(f"{said} (Ctrl-C stops it)", flush=True)
    web.run_app(app, host=bind, port=port, print=None, access_log=None)
