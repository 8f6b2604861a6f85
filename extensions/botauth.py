"""Web Bot Auth: requests signed so a site can tell this crawler from one that
claims its name (HTTP Message Signatures, RFC 9421, with an Ed25519 key whose
public half is published in a key directory).

Each request carries ``Signature-Agent``, ``Signature-Input`` and ``Signature``:
label ``sig1``, with ``created``, ``expires`` (``BOT_AUTH_VALIDITY`` seconds
later), ``keyid`` (the key's JWK thumbprint, RFC 7638), ``alg="ed25519"`` and
``tag="web-bot-auth"``. Two forms (``BOT_AUTH_FORMAT``):

* ``wg``, the working group's: ``Signature-Agent`` is a structured-field
  dictionary, ``sig1="https://..."``; the signature covers ``@authority`` and
  that member (``"signature-agent";key="sig1"``), with a fresh ``nonce`` per
  request, so a verifier can refuse a replay;
* ``legacy``, the earlier drafts': ``Signature-Agent`` a plain quoted string,
  covered whole, and no nonce.

With several keys (``BOT_AUTH_KEYS``, for rotation) a request is signed with
the newest one valid now: the latest ``nbf`` its directory states that has
passed, and no ``exp`` that has. The key is read with ``cryptography``; the
signature base is built here, by RFC 9421 section 2.5.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from extensions.exceptions import ConfigError

LABEL = "sig1"
TAG = "web-bot-auth"
FORMATS = ("wg", "legacy")
#: what each form covers, as Signature-Input names it
COVERED = {
    "wg": ('"@authority"', f'"signature-agent";key="{LABEL}"'),
    "legacy": ('"@authority"', '"signature-agent"'),
}
NONCE_BYTES = 32
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


def own_entry(path: str, key: Ed25519PrivateKey) -> dict[str, Any]:
    """The key's entry in its published directory (its JWK, ``nbf``, ``exp``)."""
    kid = thumbprint(key.public_key())
    for jwk in published_directory(path, key)["keys"]:
        if isinstance(jwk, dict) and jwk.get("kid") == kid:
            return jwk
    return directory(key.public_key())["keys"][0]


def _seconds(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class SigningKey:
    key: Ed25519PrivateKey
    keyid: str
    #: its directory entry, published as it is
    entry: dict[str, Any]
    not_before: float = 0.0
    expires: float | None = None

    @classmethod
    def read(cls, path: str) -> SigningKey:
        """The key in ``path`` and its validity; ValueError says why not."""
        key = load_private_key(path)
        entry = own_entry(path, key)
        return cls(key, thumbprint(key.public_key()), entry,
                   _seconds(entry.get("nbf")) or 0.0, _seconds(entry.get("exp")))  # fmt: skip

    def valid(self, now: float) -> bool:
        return self.not_before <= now and (self.expires is None or now < self.expires)


def newest_valid(keys: list[SigningKey], now: float) -> SigningKey | None:
    valid = [k for k in keys if k.valid(now)]
    return max(valid, key=lambda k: k.not_before) if valid else None


def expiry_problem(keys: list[SigningKey], now: float | None = None) -> str | None:
    """What is wrong with the keys' validity: none valid now, or the one signing
    expires within a day with no newer one to take over."""
    now = now if now is not None else time.time()
    signing = newest_valid(keys, now)
    if signing is None:
        return "no key is valid now (its directory's nbf and exp): make one (scrapy botauth keygen)"
    if signing.expires is not None and signing.expires - now < EXPIRY_MARGIN:
        later = [k for k in keys if k.not_before > now and k.not_before < signing.expires]
        if not later:
            when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(signing.expires))
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
    def __init__(self, keys: list[SigningKey] | Ed25519PrivateKey, agent: str, validity: float,
                 form: str = "wg"):  # fmt: skip
        if isinstance(keys, Ed25519PrivateKey):
            public = keys.public_key()
            keys = [SigningKey(keys, thumbprint(public), directory(public)["keys"][0])]
        if not keys or form not in FORMATS:
            raise ValueError("a signer needs a key and a form of " + ", ".join(FORMATS))
        self.keys = keys
        self.form = form
        agent_string = f'"{agent}"'  # a structured-field string
        # the header, and its value as the signature base has it
        self.agent_field = f"{LABEL}={agent_string}" if form == "wg" else agent_string
        self.agent_value = agent_string
        self.covered = " ".join(COVERED[form])
        self.validity = validity

    def signing_key(self, now: float) -> SigningKey:
        """The newest key valid at ``now`` (past every one's: the last to expire)."""
        found = newest_valid(self.keys, now)
        return found or max(self.keys, key=lambda k: k.expires or float("inf"))

    def directory(self) -> dict[str, list[dict[str, Any]]]:
        """The key directory to publish: every key, newest first."""
        ordered = sorted(self.keys, key=lambda k: k.not_before, reverse=True)
        return {"keys": [dict(k.entry) for k in ordered]}

    def headers(self, url: str, now: float | None = None,
                fields: dict[str, str] | None = None) -> dict[str, str]:  # fmt: skip
        """The three headers that sign a request for ``url``; the signature covers
        the header ``fields`` given too (name: value, as sent: pay-per-crawl's price)."""
        moment = now if now is not None else time.time()
        key, created = self.signing_key(moment), int(moment)
        nonce = ""
        if self.form == "wg":
            nonce = f';nonce="{base64.b64encode(os.urandom(NONCE_BYTES)).decode()}"'
        extra = {name.lower(): value.strip() for name, value in (fields or {}).items()}
        covered = " ".join([self.covered, *(f'"{name}"' for name in extra)])
        params = (
            f"({covered});created={created};expires={created + int(self.validity)}"
            f'{nonce};keyid="{key.keyid}";alg="ed25519";tag="{TAG}"'
        )
        agent_line = COVERED[self.form][1]
        lines = [f'"@authority": {authority(url)}', f"{agent_line}: {self.agent_value}"]
        lines += [f'"{name}": {value}' for name, value in extra.items()]
        base = "\n".join([*lines, f'"@signature-params": {params}'])
        signature = base64.b64encode(key.key.sign(base.encode())).decode()
        return {
            "Signature-Agent": self.agent_field,
            "Signature-Input": f"{LABEL}={params}",
            "Signature": f"{LABEL}=:{signature}:",
        }


def key_paths(settings: Any) -> list[tuple[str, str]]:
    """(setting, path) of every key: BOT_AUTH_KEY's, then BOT_AUTH_KEYS'."""
    paths = [("BOT_AUTH_KEY", settings.get("BOT_AUTH_KEY") or "")]
    paths += [("BOT_AUTH_KEYS", str(path)) for path in settings.getlist("BOT_AUTH_KEYS")]
    return [(name, path) for name, path in paths if path]


def read_keys(settings: Any) -> list[SigningKey]:
    """Every key the settings name; ConfigError names the setting of one that is wrong."""
    keys = []
    for name, path in key_paths(settings):
        try:
            keys.append(SigningKey.read(path))
        except ValueError as exc:
            raise ConfigError(f"{name} {path!r} {exc}") from None
    return keys


def signer_from_settings(settings: Any) -> BotSigner | None:
    """The signer BOT_AUTH_* describe, None without a key; ConfigError names
    the setting that is wrong."""
    keys = read_keys(settings)
    if not keys:
        return None
    agent = settings.get("BOT_AUTH_SIGNATURE_AGENT") or ""
    problem = agent_problem(agent)
    if problem:
        raise ConfigError(f"BOT_AUTH_SIGNATURE_AGENT {agent!r} {problem}")
    expiring = expiry_problem(keys)
    if expiring:
        raise ConfigError(f"{key_paths(settings)[-1][0]} {expiring}")
    form = settings.get("BOT_AUTH_FORMAT") or "wg"
    return BotSigner(keys, agent, settings.getfloat("BOT_AUTH_VALIDITY"), form)
