"""The console's web application: pages (server-side templates, refreshed in place)
and the JSON API under them, on aiohttp.

Pages: ``/`` the overview, ``/nodes``, ``/NAME`` a spider's crawl, ``/NAME/hosts``,
``/NAME/dlq``. API: ``/api/overview``, ``/api/nodes``, ``/api/NAME/status`` (what
``scrapy status NAME --json`` prints), ``/api/NAME/crawls``, ``/api/NAME/hosts``,
``/api/NAME/dlq``, ``/api/NAME/series``, ``/api/NAME/audit``; actions (POST, JSON):
``/api/NAME/dlq/replay``, ``/api/NAME/dlq/delete``, ``/api/NAME/seed``, ``/api/NAME/scope``,
``/api/NAME/crawls/ID/pause|resume|stop`` (ID ``-``: the crawl without an id,
``*``: every crawl). Redis is read in worker threads: the loop never waits on it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING, Any

import jinja2
from aiohttp import web
from pymongo.errors import PyMongoError
from redis import exceptions as redis_errors

from extensions import __version__, clock, sharding
from extensions.console import readers
from extensions.console.actions import ActionRefused, Actions, Choice
from extensions.console.security import Gate
from extensions.exceptions import RedisUnavailable

if TYPE_CHECKING:
    from collections.abc import Callable

    import redis

    from extensions.frontier.start_urls import EntryRules
    from extensions.keys import SpiderKeys

logger = logging.getLogger(__name__)

NO_ID, EVERY = "-", "*"  # the crawl without an id, and every crawl, in action paths


@dataclass
class Cluster:
    """What the console reads and acts on: one Redis, the project's spiders."""

    server: redis.Redis
    spiders: dict[str, SpiderKeys]
    limits: readers.Limits
    queue_by: str
    rules: EntryRules
    crawl_budget: int
    refresh: float
    #: RECRAWL_STORE = "mongo": each spider's recrawl schedule store, as scrapy status reads it
    status_stores: dict[str, Any] = field(default_factory=dict)
    _rates: dict[str, tuple[float, int, int, float, float]] = field(default_factory=dict)

    def spider(self, name: str) -> SpiderKeys:
        keys = self.spiders.get(name)
        if keys is None:
            raise web.HTTPNotFound(text=f"no spider named {name!r}")
        return keys

    def keys(self, name: str) -> SpiderKeys:
        """The spider's keys in the shards its crawl has (reads Redis: off the loop)."""
        return sharding.as_recorded(self.server, self.spider(name))

    def act(self, name: str, action: str, *args: Any) -> Any:
        """One of ``Actions``' methods on spider ``name`` (reads Redis: off the loop)."""
        actions = Actions(
            self.server, self.keys(name), queue_by=self.queue_by, rules=self.rules,
            scan=self.limits.dlq_scan, crawl_budget=self.crawl_budget,
        )  # fmt: skip
        return getattr(actions, action)(*args)

    def rates(self, name: str, status: dict[str, Any]) -> tuple[float, float]:
        """Pages and items per second since this console's previous look (at
        least two seconds back, so that a burst of page loads does not zero it)."""
        now, pages, items = status["time"], status["pages"], status["items"]
        before = self._rates.get(name)
        if before is None:
            self._rates[name] = (now, pages, items, 0.0, 0.0)
            return 0.0, 0.0
        then, old_pages, old_items, page_rate, item_rate = before
        if now - then >= 2:
            page_rate = max(pages - old_pages, 0) / (now - then)
            item_rate = max(items - old_items, 0) / (now - then)
            self._rates[name] = (now, pages, items, page_rate, item_rate)
        return round(page_rate, 1), round(item_rate, 1)

    def overview(self) -> dict[str, Any]:
        spiders = []
        for name in sorted(self.spiders):
            keys = self.keys(name)
            view = readers.summary(self.server, keys, self.limits, self.status_stores.get(name))
            status = view["status"]
            pages_rate, items_rate = self.rates(name, status)
            spiders.append(
                {
                    "name": name,
                    "pages_per_s": pages_rate,
                    "items_per_s": items_rate,
                    "nodes_alive": sum(node["alive"] for node in status["nodes"]),
                    **{k: v for k, v in status.items() if k != "nodes"},
                    "crawls": view["crawls"],
                }
            )
        return {"time": clock.now(), "version": __version__, "spiders": spiders}

    def nodes(self) -> dict[str, Any]:
        rows = []
        for name in sorted(self.spiders):
            rows.extend(readers.nodes(self.server, self.keys(name), self.limits))
        return {"time": clock.now(), "nodes": rows}


async def _off_loop(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run a Redis read or action in a worker thread; Redis away is a 503 that
    says so (the console stays up and answers again once Redis is back)."""
    try:
        return await asyncio.to_thread(function, *args, **kwargs)
    except (RedisUnavailable, redis_errors.ConnectionError, redis_errors.TimeoutError) as exc:
        logger.warning("console: Redis is unavailable: %s", exc)
        raise web.HTTPServiceUnavailable(text=f"Redis is unavailable: {exc}") from None
    except PyMongoError as exc:  # the recrawl schedule, with RECRAWL_STORE = "mongo"
        logger.warning("console: MongoDB is unavailable: %s", exc)
        raise web.HTTPServiceUnavailable(text=f"MongoDB is unavailable: {exc}") from None
    except redis_errors.RedisError as exc:  # a key of another type, written by someone else
        logger.error("console: Redis refused a read: %s", exc)
        raise web.HTTPBadGateway(text=f"Redis refused: {exc}") from None


def _int(request: web.Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query.get(name, "")
    try:
        value = int(raw) if raw else default
    except ValueError:
        raise web.HTTPBadRequest(text=f"{name} must be a whole number") from None
    if not low <= value <= high:
        raise web.HTTPBadRequest(text=f"{name} must be from {low} to {high}")
    return value


def _letter_filter(request: web.Request) -> readers.LetterFilter:
    query = request.query
    return readers.LetterFilter(
        reason=query.get("reason", "")[:500], host=query.get("host", "")[:300],
        q=query.get("q", "")[:500],
    )  # fmt: skip


class Console:
    """The routes: each page has a JSON twin under /api/."""

    def __init__(self, cluster: Cluster, gate: Gate):
        self.cluster = cluster
        self.gate = gate
        templates = resources.files("extensions.console") / "templates"
        self.env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(str(templates)),
            autoescape=True,  # a URL or a reason is hostile input: always escaped
            undefined=jinja2.StrictUndefined,
        )
        self.env.filters["when"] = _when
        self.env.filters["ago"] = _ago
        self.env.filters["megabytes"] = _megabytes

    # --- reading --------------------------------------------------------------

    async def overview_data(self) -> dict[str, Any]:
        return await _off_loop(self.cluster.overview)

    async def nodes_data(self) -> dict[str, Any]:
        return await _off_loop(self.cluster.nodes)

    async def read(self, name: str, function: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        """``function(server, keys, limits, ...)`` for spider ``name``, off the loop."""
        self.cluster.spider(name)  # 404 before anything is read

        def call() -> Any:
            cluster = self.cluster
            return function(cluster.server, cluster.keys(name), cluster.limits, *args, **kw)

        return await _off_loop(call)

    async def spider_data(self, name: str) -> dict[str, Any]:
        view = await self.read(name, readers.spider_view, self.cluster.status_stores.get(name))
        view["pages_per_s"], view["items_per_s"] = self.cluster.rates(name, view["status"])
        return view

    async def hosts_data(self, request: web.Request, name: str) -> dict[str, Any]:
        state = request.query.get("state", "active")
        if state not in readers.HOST_STATES:
            raise web.HTTPBadRequest(text=f"state must be one of {', '.join(readers.HOST_STATES)}")
        return await self.read(
            name, readers.hosts, state=state, offset=_int(request, "offset", 0, 0, 10**9),
            limit=_int(request, "limit", 50, 1, 500), host=request.query.get("host", "")[:300],
            group=request.query.get("group", ""),
        )  # fmt: skip

    async def dlq_data(self, request: web.Request, name: str) -> dict[str, Any]:
        return await self.read(
            name, readers.dead_letters, _letter_filter(request),
            offset=_int(request, "offset", 0, 0, 10**9), limit=_int(request, "limit", 50, 1, 500),
        )  # fmt: skip

    # --- pages ----------------------------------------------------------------

    def page(self, request: web.Request, template: str, **context: Any) -> web.Response:
        body = self.env.get_template(template).render(
            user=request.get("user"), csrf=request.get("csrf", ""),
            refresh=self.cluster.refresh, spiders=sorted(self.cluster.spiders),
            partial=request.query.get("partial") == "1", version=__version__, **context,
        )  # fmt: skip
        return web.Response(text=body, content_type="text/html")

    async def overview_page(self, request: web.Request) -> web.Response:
        return self.page(request, "overview.html", data=await self.overview_data())

    async def nodes_page(self, request: web.Request) -> web.Response:
        return self.page(request, "nodes.html", data=await self.nodes_data())

    async def spider_page(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        return self.page(request, "spider.html", name=name, data=await self.spider_data(name))

    async def hosts_page(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        data = await self.hosts_data(request, name)
        return self.page(request, "hosts.html", name=name, data=data, query=request.query,
                         states=readers.HOST_STATES)  # fmt: skip

    async def dlq_page(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        data = await self.dlq_data(request, name)
        return self.page(request, "dlq.html", name=name, data=data, query=request.query)

    async def login_page(self, request: web.Request) -> web.StreamResponse:
        target = request.query.get("next", "/")
        error = ""
        if request.method == "POST":
            form = await request.post()
            target = str(form.get("next", "/"))
            user = await asyncio.to_thread(  # a password hash takes a while to check
                self.gate.users.check, str(form.get("username", "")), str(form.get("password", ""))
            )
            if user is not None:
                logger.info("console: %s logged in", user.name)
                redirect = web.HTTPSeeOther(_local(target))
                self.gate.set_session(request, redirect, user)
                raise redirect
            logger.warning("console: a failed login as %r", str(form.get("username", ""))[:100])
            error = "wrong user name or password"
        response = self.page(request, "login.html", next=_local(target), error=error)
        if error:
            response.set_status(401)
        return response

    async def logout(self, request: web.Request) -> web.StreamResponse:
        response = web.HTTPSeeOther("/login" if self.gate.users.login_required else "/")
        response.del_cookie("console_session", path="/")
        raise response

    # --- the API --------------------------------------------------------------

    async def api_overview(self, request: web.Request) -> web.Response:
        return web.json_response(await self.overview_data())

    async def api_nodes(self, request: web.Request) -> web.Response:
        return web.json_response(await self.nodes_data())

    async def api_status(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        store = self.cluster.status_stores.get(name)
        return web.json_response(await self.read(name, readers.status, store))

    async def api_crawls(self, request: web.Request) -> web.Response:
        data = await self.spider_data(request.match_info["name"])
        return web.json_response({"crawls": data["crawls"]})

    async def api_hosts(self, request: web.Request) -> web.Response:
        return web.json_response(await self.hosts_data(request, request.match_info["name"]))

    async def api_dlq(self, request: web.Request) -> web.Response:
        return web.json_response(await self.dlq_data(request, request.match_info["name"]))

    async def api_series(self, request: web.Request) -> web.Response:
        return web.json_response(await self.read(request.match_info["name"], readers.series_of))

    async def api_audit(self, request: web.Request) -> web.Response:
        records = await self.read(request.match_info["name"], readers.audit_log, 100)
        return web.json_response({"audit": records})

    async def act(self, request: web.Request) -> web.Response:
        name, what = request.match_info["name"], request.match_info["what"]
        user = request["user"].name
        try:
            body = await request.json() if request.can_read_body else {}
        except ValueError:
            return web.json_response({"error": "the body is not JSON"}, status=400)
        self.cluster.spider(name)
        try:
            if what in ("dlq/replay", "dlq/delete"):
                choice = Choice.from_json(body)
                method = "replay" if what == "dlq/replay" else "delete"
                result = await _off_loop(self.cluster.act, name, method, user, choice)
            else:  # seed, scope
                result = await _off_loop(self.cluster.act, name, what, user, body)
        except ActionRefused as exc:
            return web.json_response({"error": str(exc)}, status=400)
        return web.json_response(result)

    async def act_on_crawl(self, request: web.Request) -> web.Response:
        name, crawl, action = (request.match_info[k] for k in ("name", "crawl", "action"))
        target = None if crawl == EVERY else "" if crawl == NO_ID else crawl
        self.cluster.spider(name)
        try:
            user = request["user"].name
            result = await _off_loop(self.cluster.act, name, "crawl", user, action, target)
        except ActionRefused as exc:
            return web.json_response({"error": str(exc)}, status=400)
        return web.json_response(result)

    async def static(self, request: web.Request) -> web.StreamResponse:
        path = request.match_info["path"]
        if ".." in path or path.startswith("/"):
            raise web.HTTPNotFound()
        resource = resources.files("extensions.console") / "static" / path
        if not resource.is_file():
            raise web.HTTPNotFound()
        kinds = {".js": "text/javascript", ".css": "text/css"}
        kind = next((v for k, v in kinds.items() if path.endswith(k)), "text/plain")
        return web.Response(
            body=resource.read_bytes(), content_type=kind,
            headers={"Cache-Control": "max-age=3600"},
        )  # fmt: skip

    def routes(self, app: web.Application) -> None:
        r = app.router
        r.add_get("/static/{path:.+}", self.static)
        r.add_route("*", "/login", self.login_page)
        r.add_post("/logout", self.logout)
        r.add_get("/api/overview", self.api_overview)
        r.add_get("/api/nodes", self.api_nodes)
        r.add_get("/api/{name}/status", self.api_status)
        r.add_get("/api/{name}/crawls", self.api_crawls)
        r.add_get("/api/{name}/hosts", self.api_hosts)
        r.add_get("/api/{name}/dlq", self.api_dlq)
        r.add_get("/api/{name}/series", self.api_series)
        r.add_get("/api/{name}/audit", self.api_audit)
        r.add_post("/api/{name}/crawls/{crawl}/{action}", self.act_on_crawl)
        r.add_post("/api/{name}/{what:dlq/replay|dlq/delete|seed|scope}", self.act)
        r.add_get("/", self.overview_page)
        r.add_get("/nodes", self.nodes_page)
        r.add_get("/{name}", self.spider_page)
        r.add_get("/{name}/hosts", self.hosts_page)
        r.add_get("/{name}/dlq", self.dlq_page)


def make_app(cluster: Cluster, gate: Gate) -> web.Application:
    app = web.Application(middlewares=[gate.middleware], client_max_size=4 * 1024 * 1024)
    Console(cluster, gate).routes(app)
    return app


def _local(target: str) -> str:
    """A path on this console only (a login's next page is user input)."""
    # browsers drop tabs and newlines from a URL: "/\t/evil.test" would become "//evil.test"
    if not target.startswith("/") or any(c <= " " or c == "\\" for c in target):
        return "/"
    if target.startswith("//"):
        return "/"
    return target


def _when(stamp: Any) -> str:
    if not isinstance(stamp, (int, float)) or not 0 < stamp < 1e11:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp))


def _ago(seconds: Any) -> str:
    if not isinstance(seconds, (int, float)):
        return "-"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _megabytes(value: Any) -> str:
    return f"{value / 2**20:.0f} MB" if isinstance(value, int) and value > 0 else "-"
