"""``scrapy console [--bind ADDRESS] [--port PORT]``: the web console for every
spider and crawl of the project in the cluster's Redis; ``--hash-password`` makes
a password hash for CONSOLE_USERS (the password read from standard input)."""

from __future__ import annotations

import getpass
import ipaddress
import sys
from typing import TYPE_CHECKING

from scrapy.exceptions import UsageError
from scrapy.spiderloader import get_spider_loader

from extensions import config
from extensions.botauth import signer_from_settings
from extensions.cli import ProjectCommand, redis_for_command, serve_web_app, spider_keys
from extensions.console.auth import Sessions, Users, hash_password, users_problem
from extensions.frontier.ranks.state import RankBudget
from extensions.frontier.start_urls import EntryRules
from extensions.recrawl.statusstore import MongoStatusStore, store_kind

if TYPE_CHECKING:
    import argparse

    from aiohttp import web
    from scrapy.settings import Settings


def is_loopback(address: str) -> bool:
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False  # a host name: may resolve to anything


def build_app(settings: Settings) -> web.Application:
    """The console's application for a project's settings (its spiders, its Redis)."""
    from extensions.console import readers
    from extensions.console.app import Cluster, make_app
    from extensions.console.keydirectory import serve_key_directory
    from extensions.console.security import Gate
    from extensions.frontier.part import StatusParts

    server = redis_for_command(settings)
    names = get_spider_loader(settings).list()
    cluster = Cluster(
        server=server,
        spiders={name: spider_keys(settings, name) for name in names},
        limits=readers.Limits(
            node_timeout=settings.getfloat("NODE_TIMEOUT"),
            stall_time=settings.getfloat("NODE_STALL_TIME"),
            host_page_budget=settings.getint("HOST_PAGE_BUDGET"),
            rank_budget=RankBudget.from_settings(settings),
            series_hours=settings.getfloat("SERIES_HOURS"),
            dlq_scan=settings.getint("CONSOLE_DLQ_SCAN"),
            parts=StatusParts.from_settings(settings),
        ),
        queue_by=settings.get("FRONTIER_QUEUE_BY"),
        rules=EntryRules.from_settings(settings),
        crawl_budget=settings.getint("CRAWL_PAGE_BUDGET"),
        refresh=settings.getfloat("CONSOLE_REFRESH"),
    )
    users = Users(
        settings.get("CONSOLE_USER"),
        settings.get("CONSOLE_PASSWORD"),
        settings.getdict("CONSOLE_USERS"),
    )
    sessions = Sessions(settings.get("CONSOLE_SECRET"), settings.getfloat("CONSOLE_SESSION_HOURS"))
    if store_kind(settings) == "mongo":  # the recrawl schedule scrapy status shows
        cluster.status_stores = {
            name: MongoStatusStore.from_settings(settings, name) for name in names
        }
    app = make_app(cluster, Gate(users, sessions, str(settings.get("CONSOLE_SECURE_COOKIE"))))
    signer = signer_from_settings(settings)
    if signer is not None:  # a signing cluster's key directory, for the sites it visits
        serve_key_directory(app, signer.directory())
    return app


class Command(ProjectCommand):
    def syntax(self) -> str:
        return "[--bind ADDRESS] [--port PORT] | --hash-password"

    def short_desc(self) -> str:
        return "Serve the web console: crawls, hosts, nodes and dead letters, to watch and act on"

    def long_desc(self) -> str:
        return (
            "Serves the console for every spider of the project and every crawl in the "
            "cluster's Redis: the overview at /, /nodes, /NAME, /NAME/hosts, /NAME/dlq, and "
            "each as JSON under /api/. It listens on loopback unless CONSOLE_PASSWORD (or "
            "CONSOLE_USERS) is set; with a password every page and API call needs a login "
            "or HTTP Basic. --hash-password reads a password from standard input and prints "
            "the hash CONSOLE_USERS takes."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--bind", metavar="ADDRESS", default=None,
                            help="interface to listen on (default CONSOLE_BIND)")  # fmt: skip
        parser.add_argument("--port", type=int, default=None, metavar="PORT",
                            help="TCP port (default CONSOLE_PORT, 6880)")  # fmt: skip
        parser.add_argument("--hash-password", action="store_true", dest="hash_password",
                            help="print a password hash for CONSOLE_USERS and exit")  # fmt: skip

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if args:
            raise UsageError("scrapy console takes no arguments (it serves every spider)")
        if opts.hash_password:
            prompt = sys.stdin.isatty()
            password = getpass.getpass("password: ") if prompt else sys.stdin.readline()
            password = password.rstrip("\n")
            if not password:
                raise UsageError("an empty password cannot be hashed")
            print(hash_password(password))
            return
        assert self.settings is not None
        settings = self.settings
        problems = [p for p in config.problems(settings) if p.startswith(("CONSOLE_", "SERIES_"))]
        try:
            users_said = users_problem(settings.getdict("CONSOLE_USERS"))
        except (ValueError, TypeError):  # -s CONSOLE_USERS=... that is not JSON
            users_said = 'must be JSON: {"name": {"password": HASH, "role": "admin" or "read"}}'
        if users_said:
            problems.append(f"CONSOLE_USERS: {users_said}")
        if problems:
            raise UsageError("; ".join(problems))
        bind = opts.bind or settings.get("CONSOLE_BIND")
        port = settings.getint("CONSOLE_PORT") if opts.port is None else opts.port
        if not 0 <= port <= 65535:
            raise UsageError(f"--port must be from 0 to 65535, not {port}")
        login = bool(settings.get("CONSOLE_PASSWORD") or settings.getdict("CONSOLE_USERS"))
        if not is_loopback(bind) and not login:
            raise UsageError(
                f"--bind {bind} is not a loopback address: set CONSOLE_PASSWORD (or "
                "CONSOLE_USERS) first; without a password the console listens on 127.0.0.1 only"
            )
        serve_web_app(settings, build_app, f"console on http://{bind}:{port}/", bind, port)
