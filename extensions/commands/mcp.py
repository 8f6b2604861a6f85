"""``scrapy mcp [NAME] [--http] [--bind ADDRESS] [--port PORT]``: the API's calls
as Model Context Protocol tools (``extensions/api/mcpserver.py``) for NAME's
nodes (API_SPIDER unless named), over stdio, or streamable HTTP at /mcp."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.exceptions import UsageError

from extensions.cli import ProjectCommand
from extensions.commands.api import api_keys, api_service, check_served, rate_limit

if TYPE_CHECKING:
    import argparse

DEFAULT_PORT = 3003


class Command(ProjectCommand):
    def syntax(self) -> str:
        return "[NAME] [--http [--bind ADDRESS] [--port PORT]]"

    def short_desc(self) -> str:
        return "Serve the API's calls as MCP tools (stdio, or streamable HTTP)"

    def long_desc(self) -> str:
        return (
            "Serves the Model Context Protocol for agents and coding tools: scrape, crawl, "
            "crawl_status, cancel_crawl, map, search_documents and archive_lookup, each "
            "done by NAME's nodes (API_SPIDER unless named) under the cluster's robots.txt, "
            "host rates and budgets, as scrapy api's calls are. Over stdio (the default: "
            "an MCP client starts this command) no key is asked, the calls counted as one "
            "key's; with --http it listens on 127.0.0.1:3003/mcp and every request needs "
            "Authorization: Bearer KEY with a key of API_KEYS."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--http", action="store_true",
                            help="streamable HTTP at /mcp instead of stdio")  # fmt: skip
        parser.add_argument("--bind", metavar="ADDRESS", default="127.0.0.1",
                            help="with --http: the interface (default 127.0.0.1)")  # fmt: skip
        parser.add_argument("--port", type=int, default=DEFAULT_PORT, metavar="PORT",
                            help=f"with --http: TCP port (default {DEFAULT_PORT})")  # fmt: skip

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) > 1:
            raise UsageError("scrapy mcp takes at most one spider name")
        assert self.settings is not None
        settings = self.settings
        check_served(settings, opts.port if opts.http else None)
        name = args[0] if args else settings.get("API_SPIDER")
        service = api_service(settings, name)
        from extensions.api.mcpserver import build_server, http_app

        if not opts.http:
            build_server(service, name, rate_limit(settings, name)).run("stdio")
            return
        keys = api_keys(settings)
        import logging

        import uvicorn

        logging.basicConfig(level=settings.get("LOG_LEVEL", "INFO"),
                            format="%(asctime)s [%(name)s] %(levelname)s: %(message)s")  # fmt: skip
        app = http_app(build_server(service, name), keys, rate_limit(settings, name), opts.bind)
        print(f"MCP on http://{opts.bind}:{opts.port}/mcp (Ctrl-C stops it)", flush=True)
        uvicorn.run(app, host=opts.bind, port=opts.port, log_level="warning")
