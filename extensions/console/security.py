"""The console's gate: who is asking (login session, HTTP Basic, or nobody on a
console without login), whether they may act, and CSRF for every action.

Rules for a request that changes something (any POST but the login):
- a read-only user is refused (403);
- with a session cookie, the session's CSRF token must come with it, in the
  ``X-CSRF-Token`` header (403 without it);
- with HTTP Basic (a script), the body must be JSON: a page elsewhere cannot send
  that to us without a CORS preflight, which the console never grants;
- an ``Origin`` header, when the browser sends one, must be the console's own.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
from typing import TYPE_CHECKING
from urllib.parse import quote, urlsplit

from aiohttp import web

from extensions.botauth import DIRECTORY_PATH
from extensions.console.auth import LOCAL, Session, Sessions, User, Users

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

logger = logging.getLogger(__name__)

USER = web.AppKey("user", User)
# the way in and out (same-origin only), and a signing cluster's key directory
PUBLIC = ("/static/", "/login", "/logout", DIRECTORY_PATH)
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
)


def secure_cookie(request: web.Request, setting: str) -> bool:
    if setting.lower() in ("true", "1"):
        return True
    if setting.lower() in ("false", "0"):
        return False
    return request.secure or request.headers.get("X-Forwarded-Proto", "") == "https"


class Gate:
    def __init__(self, users: Users, sessions: Sessions, secure: str):
        self.users = users
        self.sessions = sessions
        self.secure = secure

    def session_of(self, request: web.Request) -> Session | None:
        session = self.sessions.read(request.cookies.get(Sessions.COOKIE))
        if session is None:
            return None
        if self.users.login_required and self.users.still(session.user) is None:
            return None
        if not self.users.login_required and session.user != LOCAL:
            return None  # a login of another configuration
        return session

    def basic_user(self, request: web.Request) -> User | None:
        header = request.headers.get("Authorization", "")
        scheme, _, encoded = header.partition(" ")
        if scheme.lower() != "basic":
            return None
        try:
            name, _, password = base64.b64decode(encoded, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None
        return self.users.check(name, password)

    def set_session(self, request: web.Request, response: web.StreamResponse, user: User) -> str:
        session, cookie = self.sessions.issue(user)
        response.set_cookie(
            Sessions.COOKIE, cookie, httponly=True, samesite="Strict", path="/",
            secure=secure_cookie(request, self.secure), max_age=int(self.sessions.seconds),
        )  # fmt: skip
        return self.sessions.csrf_token(session)

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        response = await self._guarded(request, handler)
        response.headers.setdefault("Content-Security-Policy", CSP)
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("Referrer-Policy", "same-origin")
        response.headers.setdefault("X-Frame-Options", "DENY")
        if not request.path.startswith("/static/"):
            response.headers.setdefault("Cache-Control", "no-store")
        return response

    async def _guarded(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path.startswith(PUBLIC):
            if request.method == "POST" and not self.same_origin(request):
                raise web.HTTPForbidden(text="cross-site request refused")
            return await handler(request)
        # a password hash takes a while to check: not on the event loop
        basic = None
        if "Authorization" in request.headers:
            basic = await asyncio.to_thread(self.basic_user, request)
        session = None if basic else self.session_of(request)
        fresh = None
        if basic:
            user = basic
        elif session:
            user = session.user
        elif not self.users.login_required:
            # loopback without a password: a browser gets a session for its CSRF
            # token; a caller without the cookie is a script (JSON bodies only)
            user = LOCAL
            new_session, fresh = self.sessions.issue(user)
            request["csrf"] = self.sessions.csrf_token(new_session)
        else:
            return self.refuse_anonymous(request)
        request["user"] = user
        if request.method not in ("GET", "HEAD"):
            self.check_action(request, user, session)
        if session is not None:
            request["csrf"] = self.sessions.csrf_token(session)
        response = await handler(request)
        if fresh is not None:
            response.set_cookie(
                Sessions.COOKIE, fresh, httponly=True, samesite="Strict", path="/",
                secure=secure_cookie(request, self.secure),
            )  # fmt: skip
        return response

    def refuse_anonymous(self, request: web.Request) -> web.StreamResponse:
        if request.path.startswith("/api/"):
            return web.json_response(
                {"error": "log in, or send HTTP Basic credentials"},
                status=401,
                headers={"WWW-Authenticate": 'Basic realm="crawler console"'},
            )
        raise web.HTTPSeeOther("/login?next=" + quote(request.path_qs, safe=""))

    def check_action(self, request: web.Request, user: User, session: Session | None) -> None:
        if not self.same_origin(request):
            raise web.HTTPForbidden(text="cross-site request refused")
        if not user.may_act:
            logger.warning("console: %s (read-only) refused %s", user.name, request.path)
            raise web.HTTPForbidden(text=f"{user.name} may only look (role: {user.role})")
        if session is not None:
            if not self.sessions.csrf_ok(session, request.headers.get("X-CSRF-Token")):
                logger.warning("console: %s's %s without its CSRF token", user.name, request.path)
                raise web.HTTPForbidden(text="missing or wrong CSRF token")
        elif request.content_type != "application/json":
            raise web.HTTPUnsupportedMediaType(text="send the action's body as application/json")

    @staticmethod
    def same_origin(request: web.Request) -> bool:
        origin = request.headers.get("Origin")
        if origin is None:
            return True  # not a browser's cross-site request (those carry Origin)
        return urlsplit(origin).netloc == request.host
