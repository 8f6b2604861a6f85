"""Believable browser identities: a User-Agent per request with the headers
that browser sends along.

The pool is drawn once at start-up from fake-useragent's data (filtered by
``USER_AGENT_BROWSERS``, ``USER_AGENT_PLATFORMS`` and ``USER_AGENT_OS``,
weighted by how common each agent is), so choosing one per request costs a
``random.choice``. If that data cannot be loaded, a built-in list is used and
the node says so once. With ``USER_AGENT_STICKY_PER_PROXY`` every request
through one proxy carries the same identity, on every node. A request with its
own User-Agent header, or a spider with a ``user_agent`` attribute, keeps its own.
"""

from __future__ import annotations

import hashlib
import logging
import random
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from scrapy.exceptions import NotConfigured

from extensions.installed import require_addon

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

POOL_SEED = 7919
ROTATED = "_ua_rotated"  # meta: this request's identity was chosen here, so may change
CHROMIUM_BRANDS = {"Chrome": "Google Chrome", "Edge": "Microsoft Edge", "Opera": "Opera"}
ACCEPT = {
    "Firefox": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
    "Safari": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
    "chromium": (
        "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,"
        "image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7"
    ),
}
CLIENT_HINTS = ("Sec-CH-UA", "Sec-CH-UA-Mobile", "Sec-CH-UA-Platform")
CH_PLATFORMS = {"Windows": "Windows", "Mac OS X": "macOS", "Linux": "Linux",
                "Ubuntu": "Linux", "Chrome OS": "Chrome OS", "Android": "Android"}  # fmt: skip

BUILT_IN = [
    ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
     "Chrome/131.0.0.0 Safari/537.36", "Chrome", "Windows"),
    ("Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) "
     "Chrome/131.0.0.0 Safari/537.36", "Chrome", "Mac OS X"),
    ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
     "Chrome/130.0.0.0 Safari/537.36", "Chrome", "Linux"),
    ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
     "Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0", "Edge", "Windows"),
    ("Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0",
     "Firefox", "Windows"),
    ("Mozilla/5.0 (Macintosh; Intel Mac OS X 10.15; rv:133.0) Gecko/20100101 Firefox/133.0",
     "Firefox", "Mac OS X"),
    ("Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) "
     "Version/18.1 Safari/605.1.15", "Safari", "Mac OS X"),
]  # fmt: skip


@dataclass(frozen=True)
class Identity:
    user_agent: str
    browser: str
    os: str

    @property
    def chromium(self) -> bool:
        return self.browser in CHROMIUM_BRANDS

    def headers(self, language: str) -> dict[str, str]:
        accept = (
            ACCEPT["chromium"] if self.chromium else ACCEPT.get(self.browser, ACCEPT["Firefox"])
        )
        out = {"User-Agent": self.user_agent, "Accept": accept, "Accept-Language": language}
        if self.chromium:
            match = re.search(r"(?:Chrome|Edg|OPR)/(\d+)", self.user_agent)
            version = match.group(1) if match else "131"
            brand = CHROMIUM_BRANDS[self.browser]
            out["Sec-CH-UA"] = (
                f'"Chromium";v="{version}", "{brand}";v="{version}", "Not?A_Brand";v="99"'
            )
            out["Sec-CH-UA-Mobile"] = "?0"
            out["Sec-CH-UA-Platform"] = f'"{CH_PLATFORMS.get(self.os, self.os)}"'
        return out


def load_pool(
    browsers: list[str], platforms: list[str], systems: list[str], size: int, rng: random.Random
) -> tuple[list[Identity], bool]:
    """(identities, True) from fake-useragent's data, or (built-in list, False)."""
    try:
        from fake_useragent.errors import FakeUserAgentError
        from fake_useragent.utils import load
    except ImportError as exc:
        logger.warning("fake-useragent is not installed (%s); using a built-in list", exc)
        return [Identity(*row) for row in BUILT_IN], False
    try:
        rows = load()
    except FakeUserAgentError as exc:  # its data file is missing or unreadable
        logger.warning("fake-useragent data could not be loaded (%s); using a built-in list", exc)
        return [Identity(*row) for row in BUILT_IN], False
    # The data files some iPads as desktop Safari ("Macintosh ... Mobile/15E148"):
    # a desktop-only pool leaves those out, a give-away next to a desktop identity.
    desktop_only = bool(platforms) and "mobile" not in platforms and "tablet" not in platforms
    wanted = [
        row for row in rows
        if (not browsers or row.get("browser") in browsers)
        and (not platforms or row.get("type") in platforms)
        and (not systems or row.get("os") in systems)
        and not (desktop_only and "Mobile" in row.get("useragent", ""))
    ]  # fmt: skip
    if not wanted:
        logger.warning(
            "no fake-useragent entry matches USER_AGENT_BROWSERS=%s, USER_AGENT_PLATFORMS=%s, "
            "USER_AGENT_OS=%s; using a built-in list",
            browsers,
            platforms,
            systems,
        )
        return [Identity(*row) for row in BUILT_IN], False
    weights = [max(float(row.get("percent") or 0), 1e-6) for row in wanted]
    picked = rng.choices(wanted, weights=weights, k=size)
    unique = {
        row["useragent"]: Identity(row["useragent"], row["browser"] or "", row["os"] or "")
        for row in picked
    }
    return list(unique.values()), True


class RotatingUserAgentMiddleware:
    def __init__(
        self,
        pool: list[Identity],
        *,
        sticky: bool,
        language: str,
        default_headers: dict[str, str],
        default_agent: str,
    ):
        if not pool:
            raise ValueError("the user agent pool is empty")
        self.pool = pool
        self.sticky = sticky
        self.language = language
        # What Scrapy's own middlewares put on every request: not a choice to keep.
        self.default_headers = {k.lower(): v for k, v in default_headers.items()}
        self.default_headers["user-agent"] = default_agent
        self._headers: dict[Identity, dict[str, str]] = {}  # each identity's, built once

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RotatingUserAgentMiddleware:
        require_addon(crawler.settings, cls.__name__)
        s = crawler.settings
        if not s.getbool("USER_AGENT_ROTATION"):
            raise NotConfigured  # switched off: Scrapy's USER_AGENT applies
        pool, _ = load_pool(
            s.getlist("USER_AGENT_BROWSERS"),
            s.getlist("USER_AGENT_PLATFORMS"),
            s.getlist("USER_AGENT_OS"),
            s.getint("USER_AGENT_POOL_SIZE"),
            # Every node draws the same pool, so a proxy keeps one identity cluster-wide.
            random.Random(POOL_SEED),
        )
        middleware = cls(
            pool,
            sticky=s.getbool("USER_AGENT_STICKY_PER_PROXY"),
            language=s.get("USER_AGENT_LANGUAGE"),
            default_headers=s.getdict("DEFAULT_REQUEST_HEADERS"),
            default_agent=s.get("USER_AGENT") or "",
        )
        logger.info("rotating %d user agents", len(pool))
        return middleware

    def choose(self, request: Request) -> Identity:
        proxy = request.meta.get("proxy")
        if self.sticky and proxy:
            parts = urlsplit(proxy)  # the identity follows the exit, never its credentials
            digest = hashlib.sha1(f"{parts.hostname}:{parts.port}".encode()).digest()
            return self.pool[int.from_bytes(digest[:8], "big") % len(self.pool)]
        return random.choice(self.pool)

    def process_request(self, request: Request) -> None:
        rotated = request.meta.get(ROTATED)
        if not rotated and self._own(request, "User-Agent"):
            return None  # the spider or the request chose its identity
        identity = self.choose(request)
        for name in CLIENT_HINTS:
            request.headers.pop(name, None)
        headers = self._headers.get(identity)
        if headers is None:
            headers = self._headers[identity] = identity.headers(self.language)
        for name, value in headers.items():
            if name == "User-Agent" or rotated or not self._own(request, name):
                request.headers[name] = value
        request.meta[ROTATED] = True
        return None

    def _own(self, request: Request, name: str) -> bool:
        value = request.headers.get(name)
        return value is not None and value.decode("latin-1") != self.default_headers.get(
            name.lower()
        )
