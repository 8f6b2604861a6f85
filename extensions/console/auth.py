"""Who may use the console, and how a browser proves it.

Users: ``CONSOLE_USER`` with ``CONSOLE_PASSWORD`` (an admin), and ``CONSOLE_USERS``,
each with a password hash (``pbkdf2_sha256$ITERATIONS$SALT$HASH``, made by
``scrapy console --hash-password``) and a role: ``admin`` may act, ``read`` may
only look. With no password at all there is no login, and the console may only
listen on loopback.

A login session is a cookie signed with ``CONSOLE_SECRET`` (HMAC-SHA256): the
user, the role, the end of the session and a nonce, from which the session's
CSRF token is derived. Scripts send HTTP Basic instead.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass
from typing import Any

ROLES = ("admin", "read")
HASH_SCHEME = "pbkdf2_sha256"
HASH_ITERATIONS = 600_000  # OWASP's figure for PBKDF2-HMAC-SHA256


def hash_password(password: str, iterations: int = HASH_ITERATIONS) -> str:
    salt = secrets.token_hex(16)
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt.encode(), iterations)
    return f"{HASH_SCHEME}${iterations}${salt}${base64.b64encode(digest).decode()}"


def hash_problem(encoded: object) -> str | None:
    """Why ``encoded`` is not a password hash this module made, or None."""
    if not isinstance(encoded, str):
        return "must be a password hash (scrapy console --hash-password)"
    parts = encoded.split("$")
    if len(parts) != 4 or parts[0] != HASH_SCHEME or not parts[1].isdigit():
        return f"must be {HASH_SCHEME}$ITERATIONS$SALT$HASH (scrapy console --hash-password)"
    return None


def verify_password(password: str, encoded: str) -> bool:
    if hash_problem(encoded):
        return False
    _, iterations, salt, expected = encoded.split("$")
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt.encode(), int(iterations))
    return hmac.compare_digest(base64.b64encode(digest).decode(), expected)


@dataclass(frozen=True)
class User:
    name: str
    role: str

    @property
    def may_act(self) -> bool:
        return self.role == "admin"


#: who uses a console that needs no login (no password set; loopback only)
LOCAL = User("local", "admin")


def users_problem(users: Any) -> str | None:
    """Why CONSOLE_USERS is not {name: {"password": HASH, "role": ROLE}}, or None."""
    if not isinstance(users, dict):
        return 'must be {"name": {"password": HASH, "role": "admin" or "read"}}'
    for name, entry in users.items():
        if not isinstance(name, str) or not name or ":" in name:
            return f"{name!r}: a user name must be a non-empty text without ':'"
        if not isinstance(entry, dict):
            return f'{name}: must be {{"password": HASH, "role": "admin" or "read"}}'
        problem = hash_problem(entry.get("password"))
        if problem:
            return f"{name}: password {problem}"
        if entry.get("role", "admin") not in ROLES:
            return f"{name}: role must be one of {', '.join(ROLES)}"
    return None


class Users:
    #: credentials already checked against a hash, kept so that a script sending
    #: HTTP Basic with every call does not pay PBKDF2 every time (at most this many)
    CHECKED_KEEP = 256

    def __init__(self, user: str, password: str, users: dict[str, dict[str, str]]):
        self.plain = (user, password) if password else None
        self.hashed = dict(users)
        self._key = secrets.token_bytes(32)
        self._checked: dict[bytes, User] = {}

    @property
    def login_required(self) -> bool:
        return bool(self.plain or self.hashed)

    def check(self, name: str, password: str) -> User | None:
        """The user these credentials are, or None (each compared in constant time)."""
        if self.plain is not None:
            plain_user, plain_password = self.plain
            same_name = hmac.compare_digest(name.encode(), plain_user.encode())
            if hmac.compare_digest(password.encode(), plain_password.encode()) and same_name:
                return User(plain_user, "admin")
        entry = self.hashed.get(name)
        if entry is None:
            return None
        known = hmac.new(self._key, f"{name}:{password}".encode(), hashlib.sha256).digest()
        if known in self._checked:
            return self._checked[known]
        if not verify_password(password, entry["password"]):
            return None
        if len(self._checked) >= self.CHECKED_KEEP:
            self._checked.clear()
        user = self._checked[known] = User(name, entry.get("role", "admin"))
        return user

    def still(self, user: User) -> User | None:
        """The user a session names, if it may still log in (a user removed, or
        whose role changed, loses the session)."""
        if self.plain is not None and user == User(self.plain[0], "admin"):
            return user
        entry = self.hashed.get(user.name)
        if entry is not None and entry.get("role", "admin") == user.role:
            return user
        return None


@dataclass(frozen=True)
class Session:
    user: User
    nonce: str
    expires: float


class Sessions:
    """Signed session cookies and the CSRF tokens derived from them."""

    COOKIE = "console_session"

    def __init__(self, secret: str, hours: float):
        # an empty secret: a random one, so sessions end when the console restarts
        self.key = (secret or secrets.token_hex(32)).encode()
        self.seconds = hours * 3600

    def _sign(self, payload: str) -> str:
        return hmac.new(self.key, payload.encode(), hashlib.sha256).hexdigest()

    def issue(self, user: User) -> tuple[Session, str]:
        session = Session(user, secrets.token_hex(16), float(int(time.time() + self.seconds)))
        name = base64.urlsafe_b64encode(user.name.encode()).decode()
        payload = f"{name}|{user.role}|{int(session.expires)}|{session.nonce}"
        return session, f"{payload}|{self._sign(payload)}"

    def read(self, cookie: str | None) -> Session | None:
        if not cookie or cookie.count("|") != 4:
            return None
        payload, _, signature = cookie.rpartition("|")
        if not hmac.compare_digest(self._sign(payload), signature):
            return None
        name, role, expires, nonce = payload.split("|")
        try:
            user = User(base64.urlsafe_b64decode(name.encode()).decode(), role)
            ends = float(expires)
        except (ValueError, UnicodeDecodeError):
            return None
        if ends < time.time() or role not in ROLES:
            return None
        return Session(user, nonce, ends)

    def csrf_token(self, session: Session) -> str:
        return self._sign("csrf|" + session.nonce)

    def csrf_ok(self, session: Session, token: str | None) -> bool:
        return bool(token) and hmac.compare_digest(self.csrf_token(session), token or "")
