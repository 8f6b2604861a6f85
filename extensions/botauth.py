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


def directory(key: Ed25519PublicKey) -> dict[str, list[dict[str, str]]]:
    """The key directory document to publish at ``DIRECTORY_PATH``."""
    return {"keys": [{**public_jwk(key), "kid": thumbprint(key)}]}


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
    return BotSigner(key, agent, settings.getfloat("BOT_AUTH_VALIDITY"))
