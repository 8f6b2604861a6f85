"""Web Bot Auth: requests signed so a site can tell this crawler from one that
claims its name (HTTP Message Signatures, RFC 9421, with an Ed25519 key whose
public half is published in a key directory).

Each request carries ``Signature-Agent`` (the key directory's URL, a quoted
string), ``Signature-Input`` and ``Signature``: label ``sig1``, covering
``@authority`` and ``signature-agent``, with ``created``, ``expires``
(``BOT_AUTH_VALIDITY`` seconds later), ``keyid`` (the key's JWK thumbprint,
RFC 7638), ``alg="ed25519"`` and ``tag="web-bot-auth"``. The key is read with
``cryptography``; the signature base is built here, by RFC 9421 section 2.5.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from extensions.exceptions import ConfigError

LABEL = "sig1"
TAG = "web-bot-auth"
COVERED = ("@authority", "signature-agent")
DIRECTORY_PATH = "/.well-known/http-message-signatures-directory"
DIRECTORY_TYPE = "application/http-message-signatures-directory+json"
DIRECTORY_SUFFIX = ".directory.json"  # keygen's directory, beside the key file
EXPIRY_MARGIN = 86_400  # seconds: a key that expires sooner is refused at start


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def public_jwk(key: Ed25519PublicKey) -> dict[str, str]:
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return {"kty": "OKP", "crv": "Ed25519", "x": _b64url(raw)}


def thumbprint(key: Ed25519PublicKey) -> str:
    """The key's JWK thumbprint (RFC 7638): its ``keyid``."""
    jwk = public_jwk(key)
    canonical = json.dumps({k: jwk[k] for k in ("crv", "kty", "x")}, separators=(",", ":"))
    return _b64url(hashlib.sha256(canonical.encode()).digest())


def directory(
    key: Ed25519PublicKey, not_before: int | None = None, expires: int | None = None
) -> dict[str, list[dict[str, Any]]]:
    """The key directory document to publish at ``DIRECTORY_PATH``: the key, and
    when it is valid (``nbf``, ``exp``: seconds since the epoch)."""
    jwk: dict[str, Any] = {**public_jwk(key), "kid": thumbprint(key)}
    if not_before is not None:
        jwk["nbf"] = not_before
    if expires is not None:
        jwk["exp"] = expires
    return {"keys": [jwk]}


def published_directory(path: str, key: Ed25519PrivateKey) -> dict[str, Any]:
    """The directory ``scrapy botauth keygen`` wrote beside the key file (with
    the key's validity), or one made of the key alone."""
    try:
        document = json.loads(Path(path + DIRECTORY_SUFFIX).read_text())
        kid = thumbprint(key.public_key())
        if isinstance(document, dict) and any(
            isinstance(jwk, dict) and jwk.get("kid") == kid for jwk in document.get("keys", [])
        ):
            return document
    except (OSError, ValueError, AttributeError, TypeError):
        pass  # none there, or not one this key's
    return directory(key.public_key())


def expiry_problem(path: str, key: Ed25519PrivateKey, now: float | None = None) -> str | None:
    """What is wrong with the key's validity its published directory states."""
    kid = thumbprint(key.public_key())
    for jwk in published_directory(path, key)["keys"]:
        expires = jwk.get("exp") if jwk.get("kid") == kid else None
        if isinstance(expires, (int, float)) and expires - (now or time.time()) < EXPIRY_MARGIN:
            when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(expires))
            return f"expires {when}, within a day: make a new one (scrapy botauth keygen)"
    return None


def load_private_key(path: str) -> Ed25519PrivateKey:
    """The Ed25519 private key in ``path`` (PEM, PKCS#8); ValueError says why not."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ValueError(f"cannot be read: {exc.strerror or exc}") from None
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"is not a PEM private key without a password ({exc})") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise ValueError(f"holds a {type(key).__name__.removeprefix('_')}, not an Ed25519 key")
    return key


def agent_problem(url: str) -> str | None:
    """What is wrong with a key directory URL (BOT_AUTH_SIGNATURE_AGENT)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "is not a URL"
    if parts.scheme != "https" or not parts.hostname:
        return "must be an https:// URL (where the key directory is published)"
    if any(c in url for c in '"\\') or not url.isprintable():
        return "has characters a header cannot carry"
    return None


def authority(url: str) -> str:
    """``@authority`` (RFC 9421 2.2.3): the host, lower case, with a port other
    than the scheme's default."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    default = {"http": 80, "https": 443}.get(parts.scheme)
    return host if parts.port in (None, default) else f"{host}:{parts.port}"


class BotSigner:
    def __init__(self, key: Ed25519PrivateKey, agent: str, validity: float):
        self.key = key
        self.agent_field = f'"{agent}"'  # a structured-field string
        self.keyid = thumbprint(key.public_key())
        self.validity = validity

    def headers(self, url: str, now: float | None = None) -> dict[str, str]:
        """The three headers that sign a request for ``url``."""
        created = int(now if now is not None else time.time())
        components = " ".join(f'"{c}"' for c in COVERED)
        params = (
            f"({components});created={created};expires={created + int(self.validity)}"
            f';keyid="{self.keyid}";alg="ed25519";tag="{TAG}"'
        )
        base = (
            f'"@authority": {authority(url)}\n'
            f'"signature-agent": {self.agent_field}\n'
            f'"@signature-params": {params}'
        )
        signature = base64.b64encode(self.key.sign(base.encode())).decode()
        return {
            "Signature-Agent": self.agent_field,
            "Signature-Input": f"{LABEL}={params}",
            "Signature": f"{LABEL}=:{signature}:",
        }


def signer_from_settings(settings: Any) -> BotSigner | None:
    """The signer BOT_AUTH_* describe, None without a key; ConfigError names
    the setting that is wrong."""
    path = settings.get("BOT_AUTH_KEY") or ""
    if not path:
        return None
    agent = settings.get("BOT_AUTH_SIGNATURE_AGENT") or ""
    problem = agent_problem(agent)
    if problem:
        raise ConfigError(f"BOT_AUTH_SIGNATURE_AGENT {agent!r} {problem}")
    try:
        key = load_private_key(path)
    except ValueError as exc:
        raise ConfigError(f"BOT_AUTH_KEY {path!r} {exc}") from None
    expiring = expiry_problem(path, key)
    if expiring:
        raise ConfigError(f"BOT_AUTH_KEY {path!r} {expiring}")
    return BotSigner(key, agent, settings.getfloat("BOT_AUTH_VALIDITY"))
