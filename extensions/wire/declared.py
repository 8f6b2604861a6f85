"""The wire, declared (``extensions/capability.py``): certificates verified by
default against the system's trust store or ``TLS_CA_BUNDLE``, TLS sessions
resumed per host, HTTP/2 by setting. How: ``tls.py`` (the policy every HTTPS
connection is made by), ``handlers.py`` (Scrapy's download handlers with it),
``failures.py`` (a refused certificate's reason)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from extensions.capability import Capability, Setting
from extensions.settingchecks import flag, number

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings


def ca_bundle(settings: BaseSettings, name: str) -> str | None:
    """A bundle named must be a readable file of PEM certificates."""
    path = settings.get(name) or ""
    if not path:
        return None
    from extensions.wire.tls import read_bundle  # (OpenSSL's bindings: only when set)

    try:
        read_bundle(str(path))
    except (OSError, ValueError) as exc:
        return str(exc)
    return None


CAPABILITY = Capability(
    name="wire",
    about="HTTPS and HTTP/2: certificates, TLS sessions (extensions/wire/)",
    settings={
        "TLS_CA_BUNDLE": Setting(
            "",
            "a PEM file of the certificate authorities HTTPS servers are verified "
            "against, instead of the system's trust store ('': the system's); a "
            "certificate that fails is dead-lettered as tls_error with the reason",
            ca_bundle,
        ),
        "TLS_SESSIONS": Setting(
            10_000,
            "hosts whose last TLS session a node keeps to resume the next connection "
            "with (an abbreviated handshake); the least recently used go first",
            number(int, 0),
        ),
        "HTTP2_ENABLED": Setting(
            False,
            "HTTPS over HTTP/2 for hosts that offer it (ALPN), HTTP/1.1 for the rest "
            "and through proxies; a host's streams count as its requests",
            flag,
        ),
    },
    frontier_parts={"extensions.wire.part.WirePart": 160},
)
