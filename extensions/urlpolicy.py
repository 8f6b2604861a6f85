"""What a crawler node may fetch: the web, not its own machine.

A crawled page, a redirect or a start-URL entry names the URLs a node fetches;
on the open web any of them can point at ``file:///etc/passwd``, at Redis on
``127.0.0.1:6379`` or at a cloud metadata address. ``UrlPolicy`` says which
URLs are out of bounds:

* schemes other than ``ALLOWED_SCHEMES`` (http and https): refused when a
  request is queued, and the add-on removes Scrapy's download handlers for
  every other scheme, so nothing can fetch them;
* ports outside ``ALLOWED_PORTS`` (empty = any);
* URLs longer than Scrapy's ``URLLENGTH_LIMIT``, and URLs carrying
  ``user:password@`` (they would reach logs, Redis and items);
* with ``DENY_PRIVATE_NETWORKS``, addresses in private, loopback, link-local,
  multicast and reserved networks: IP literals when queued, and host names on
  the address they resolve to, at connection time (``PublicAddressResolver``),
  so a redirect or a DNS answer cannot lead there either.
"""

from __future__ import annotations

import ipaddress
import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from extensions import defaults

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

logger = logging.getLogger(__name__)

LOGGED_AT_MOST = 1000  # distinct (reason, host) pairs logged; past that only counted


def resolver_problem(settings: BaseSettings) -> str | None:
    """Why the node's resolver would not see the names it fetches, or None.
    DENY_PRIVATE_NETWORKS and DNS_SHARED work in the reactor's resolver, which
    Scrapy's Twisted HTTP/1.1 download handler asks (and a handler that says
    ``RESOLVES_BY_THE_REACTOR``, as the wire's HTTP/2 one)."""
    wanting = [name for name in ("DENY_PRIVATE_NETWORKS", "DNS_SHARED") if settings.getbool(name)]
    if not wanting:
        return None
    from scrapy.core.downloader.handlers.http11 import HTTP11DownloadHandler
    from scrapy.utils.misc import load_object

    handlers = settings.getwithbase("DOWNLOAD_HANDLERS")
    for scheme in ("http", "https"):
        path = handlers.get(scheme)
        handler = load_object(path) if isinstance(path, str) else path
        if (
            handler is not None
            and not (isinstance(handler, type) and issubclass(handler, HTTP11DownloadHandler))
            and not getattr(handler, "RESOLVES_BY_THE_REACTOR", False)
        ):
            return (
                f"{' and '.join(wanting)} work in the resolver of Scrapy's HTTP/1.1 download "
                f"handler; DOWNLOAD_HANDLERS[{scheme!r}] is {path!r}"
            )
    return None


def address_problem(host: str) -> str | None:
    """Why ``host`` (an IP address) is not on the public internet, or None."""
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None  # a name: checked once resolved
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    if not address.is_global or address.is_multicast:
        return f"address {address} is in a private, loopback, link-local or reserved network"
    return None


@dataclass(frozen=True)
class UrlPolicy:
    schemes: frozenset[str] = frozenset(defaults.ALLOWED_SCHEMES)
    ports: frozenset[int] = frozenset()  # empty = any port
    max_length: int = 2083  # Scrapy's URLLENGTH_LIMIT default
    deny_private: bool = False

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> UrlPolicy:
        return cls(
            schemes=frozenset(s.lower() for s in settings.getlist("ALLOWED_SCHEMES")),
            ports=frozenset(int(p) for p in settings.getlist("ALLOWED_PORTS", [])),
            max_length=settings.getint("URLLENGTH_LIMIT", 2083),
            deny_private=settings.getbool("DENY_PRIVATE_NETWORKS"),
        )

    def problem(self, url: str) -> tuple[str, str] | None:
        """(reason kind, message) if ``url`` may not be fetched, else None.

        Cheap on the usual URL: only the scheme and length are looked at unless
        ports or private networks are restricted, or the URL holds an '@'.
        """
        scheme = url.partition(":")[0].lower()
        if scheme not in self.schemes:
            allowed = ", ".join(sorted(self.schemes))
            return "scheme", f"unsupported scheme {scheme!r} (ALLOWED_SCHEMES: {allowed})"
        if self.max_length and len(url) > self.max_length:
            return "length", f"URL of {len(url)} characters, over URLLENGTH_LIMIT {self.max_length}"
        if not (self.ports or self.deny_private or "@" in url):
            return None
        try:
            parts = urlsplit(url)
            port = parts.port or (443 if scheme == "https" else 80)
        except ValueError as exc:
            return "malformed", f"malformed URL: {exc}"
        if parts.username is not None or parts.password is not None:
            return "credentials", "URL carries user:password@ (use http_user/http_pass instead)"
        if self.ports and port not in self.ports:
            return "port", f"port {port} is not in ALLOWED_PORTS"
        if self.deny_private and parts.hostname:
            problem = address_problem(parts.hostname)
            if problem:
                return "private", problem
        return None


class RefusedLog:
    """Logs a refusal once per (kind, host), counts every one."""

    def __init__(self, stats: Any, prefix: str):
        self.stats = stats
        self.prefix = prefix
        self._said: set[tuple[str, str]] = set()

    def refused(self, url: str, kind: str, message: str) -> None:
        self.stats.inc_value(f"{self.prefix}/{kind}")
        host = url.partition("://")[2].partition("/")[0].rpartition("@")[2][:100]
        if len(self._said) < LOGGED_AT_MOST and (kind, host) not in self._said:
            self._said.add((kind, host))
            logger.warning(
                "refused %.200s: %s (said once per host)", mask_credentials(url), message
            )


_USERINFO = re.compile(r"(://)[^/@\s\"'<>]*@")


def mask_credentials(text: str) -> str:
    """``text`` with the ``user:password@`` of every URL in it replaced by ``***@``."""
    return _USERINFO.sub(r"\1***@", text)
