"""``scrapy api [--bind ADDRESS] [--port PORT]``: Firecrawl's v2 API over the
cluster's crawls (``extensions/api/``); ``--new-key`` prints a key and the hash
API_KEYS takes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.exceptions import UsageError
from scrapy.spiderloader import get_spider_loader

from extensions import config
from extensions.api.apikeys import ApiKeys, RateLimit, new_key
from extensions.cli import ProjectCommand, redis_for_command, serve_web_app, spider_keys

if TYPE_CHECKING:
    import argparse

    from aiohttp import web
    from scrapy.settings import Settings

    from extensions.api.service import ApiService

DEFAULT_PORT = 3002  # Firecrawl's own, which tools that take a base URL often assume


def api_service(settings: Settings, spider: str | None = None) -> ApiService:
    """What answers API calls (the routes of scrapy api, the tools of scrapy mcp)
    for ``spider``'s nodes (API_SPIDER unless named)."""
    from extensions.api.archived import ArchiveLookup
    from extensions.api.jobs import Jobs
    from extensions.api.known import KnownUrls
    from extensions.api.service import ApiService
    from extensions.warc.storage import archive_for

    name = spider or settings.get("API_SPIDER")
    spiders = get_spider_loader(settings).list()
    if name not in spiders:
        raise UsageError(
            f"{name!r} is no spider of this project: set API_SPIDER to the one whose nodes "
            f"fetch what API calls ask (this project has: {', '.join(sorted(spiders)) or 'none'}"
            "), or add the bundled broad-crawl spider to yours (from crawler.spiders.web "
            "import WebSpider)"
        )
    server = redis_for_command(settings)
    keys = spider_keys(settings, name)
    warc = archive_for(settings) if settings.getbool("WARC_ENABLED") else None
    archive = None
    if warc is not None and settings.getint("WARC_CAPTURES_IN_REDIS"):
        archive = ArchiveLookup(server, keys, warc)
    return ApiService(
        jobs=Jobs(server, keys, settings),
        max_pages=settings.getint("API_MAX_PAGES"),
        scrape_timeout=settings.getfloat("API_SCRAPE_TIMEOUT"),
        archive=archive,
        known=KnownUrls(server, keys, name, settings.get("FRONTIER_QUEUE_BY"), warc),
    )


def api_keys(settings: Settings) -> ApiKeys:
    from extensions.api.apikeys import Quota

    default = Quota(settings.getint("API_RATE_LIMIT"), settings.getint("API_MAX_PAGES"))
    return ApiKeys(settings.getlist("API_KEYS"), settings.getdict("API_KEY_QUOTAS"), default)


def check_served(settings: Settings, port: int | None = None) -> None:
    """UsageError for what keeps an API server from starting: a malformed API_
    setting; with ``port`` (a network server), no key, or a port out of range."""
    problems = [p for p in config.problems(settings) if p.startswith("API_")]
    if problems:
        raise UsageError("; ".join(problems))
    if port is None:
        return
    if not api_keys(settings).hashes:
        raise UsageError("API_KEYS is empty: every call over the network needs a key "
                         "(scrapy api --new-key makes one)")  # fmt: skip
    if not 0 <= port <= 65535:
        raise UsageError(f"--port must be from 0 to 65535, not {port}")


def rate_limit(settings: Settings, spider: str | None = None) -> RateLimit:
    name = spider or settings.get("API_SPIDER")
    return RateLimit(redis_for_command(settings), spider_keys(settings, name),
                     settings.getint("API_RATE_LIMIT"))  # fmt: skip


def build_app(settings: Settings) -> web.Application:
    from extensions.api.app import make_app

    keys = api_keys(settings)
    return make_app(api_service(settings), keys, rate_limit(settings))


class Command(ProjectCommand):
    def syntax(self) -> str:
        return "[--bind ADDRESS] [--port PORT] | --new-key"

    def short_desc(self) -> str:
        return "Serve a Firecrawl-compatible API (v2 scrape, crawl and map) over the cluster"

    def long_desc(self) -> str:
        return (
            "Serves Firecrawl's v2 API under /v2/ for the tools that speak it: POST "
            "/v2/scrape (from the archive within maxAge, with WARC on), POST /v2/crawl, GET "
            "and DELETE /v2/crawl/ID, POST /v2/map. Each call is a crawl "
            "of API_SPIDER's nodes (run them as for any crawl), under the cluster's "
            "robots.txt, host rates and budgets. Every call needs Authorization: Bearer KEY, "
            "a key API_KEYS takes; --new-key prints one and its hash (put the hash in "
            f"API_KEYS). Listens on 127.0.0.1:{DEFAULT_PORT} unless told otherwise."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--bind", metavar="ADDRESS", default="127.0.0.1",
                            help="interface to listen on (default 127.0.0.1)")  # fmt: skip
        parser.add_argument("--port", type=int, default=DEFAULT_PORT, metavar="PORT",
                            help=f"TCP port (default {DEFAULT_PORT})")  # fmt: skip
        parser.add_argument("--new-key", action="store_true", dest="new_key",
                            help="print a new API key and its hash, and exit")  # fmt: skip

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if args:
            raise UsageError("scrapy api takes no arguments (API_SPIDER names the spider)")
        if opts.new_key:
            key, hashed = new_key()
            print(f"key: {key}\nAPI_KEYS entry: {hashed}")
            return
        assert self.settings is not None
        settings = self.settings
        check_served(settings, opts.port)
        said = f"API on http://{opts.bind}:{opts.port}/v2/"
        serve_web_app(settings, build_app, said, opts.bind, opts.port)
