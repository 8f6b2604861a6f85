"""How a node makes every HTTPS connection (Twisted's ``IPolicyForHTTPS``, given
to Scrapy's download handlers by ``handlers.py``).

- Certificates are verified, against the system's trust store or the
  ``TLS_CA_BUNDLE``: Scrapy's own default checks nothing. A certificate that
  fails names why (expired, self-signed, another host's...), for the
  dead-letter list (``failures.py``).
- A host's last TLS session is kept (``TLS_SESSIONS`` hosts, least recently
  used first out) and offered on the next connection to it: the server may
  resume it, an abbreviated handshake without the certificate exchange.
- Each connection and handshake is counted: ``tls/connections``,
  ``tls/handshakes`` (full), ``tls/resumed`` (stats, metrics, the node's row in
  ``scrapy status``), and per host for ``scrapy status --hosts`` (``TlsLedger``).

Connections themselves are kept alive by Scrapy's pools (HTTP/1.1's persistent
pool, HTTP/2's one connection per host): a handshake is paid when a pool opens
a connection, not per request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import weakref
from collections import Counter, OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from OpenSSL import SSL
from service_identity import VerificationError
from service_identity.hazmat import DNS_ID, IPAddress_ID, verify_service_identity
from service_identity.pyopenssl import extract_patterns
from twisted.internet import ssl
from twisted.internet.abstract import isIPAddress, isIPv6Address
from twisted.internet.interfaces import IOpenSSLClientConnectionCreator
from twisted.python.failure import Failure
from twisted.web.iweb import IPolicyForHTTPS
from zope.interface import implementer

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from twisted.protocols.tls import TLSMemoryBIOProtocol

logger = logging.getLogger(__name__)

# OpenSSL's info callback: a handshake finished
HANDSHAKE_DONE = 0x20
# OpenSSL's X509 verification errors a crawl meets, as a person would say them
VERIFY_ERRORS = {
    2: "its issuer's certificate is unknown",
    9: "the certificate is not yet valid",
    10: "the certificate has expired",
    18: "the certificate is self-signed",
    19: "a self-signed certificate in its chain",
    20: "it is not signed by an authority the node trusts",
    21: "the certificate chain is incomplete",
    23: "the certificate was revoked",
    62: "it is another host's certificate",
}


#: hosts whose counts a node holds between two heartbeats (past it: the totals only)
PENDING_HOSTS = 100_000
#: seconds a request waits for its host's first handshake before connecting anyway
FIRST_WAIT = 2.0


class CertificateRefused(Exception):
    """A server's certificate that did not verify; the reason is its text."""


def read_bundle(path: str) -> list[ssl.Certificate]:
    """The PEM certificates in ``path``; ValueError naming what is wrong."""
    text = Path(path).read_bytes()
    marker = b"-----BEGIN CERTIFICATE-----"
    blocks = [marker + block for block in text.split(marker)[1:]]
    if not blocks:
        raise ValueError(f"{path} holds no PEM certificate (-----BEGIN CERTIFICATE-----)")
    try:
        return [ssl.Certificate.loadPEM(block) for block in blocks]
    except Exception as exc:  # OpenSSL's error for a damaged block
        raise ValueError(f"{path}: a certificate that cannot be read ({exc})") from exc


def session_reused(connection: SSL.Connection) -> bool:
    """Whether the handshake just done resumed a session (OpenSSL's
    SSL_session_reused; pyOpenSSL does not wrap it)."""
    try:
        from OpenSSL._util import lib

        return bool(lib.SSL_session_reused(connection._ssl))
    except (ImportError, AttributeError):
        return False


#: what the ledger counts -> its field in the host's hash (NAME:host:HOST)
HOST_FIELDS = {"connections": "tls_c", "handshakes": "tls_h", "resumed": "tls_r"}


class TlsLedger:
    """What a node's TLS connections did: in its stats (``tls/connections``,
    ``tls/handshakes``, ``tls/resumed``), and by host until the next heartbeat
    adds them to the host's hash for ``scrapy status --hosts`` (``part.py``)."""

    def __init__(self, stats: Any):
        self.stats = stats
        self.totals: Counter[str] = Counter()
        #: host -> its counts since the last ``take`` (at most a beat's worth)
        self.pending: dict[str, Counter[str]] = {}

    def count(self, host: str, what: str) -> None:
        if self.stats is not None:
            self.stats.inc_value(f"tls/{what}")
        self.totals[what] += 1
        if host in self.pending or len(self.pending) < PENDING_HOSTS:
            self.pending.setdefault(host, Counter())[what] += 1

    def take(self) -> dict[str, Counter[str]]:
        """The counts by host since the last call, handed over."""
        pending, self.pending = self.pending, {}
        return pending


@implementer(IPolicyForHTTPS)
class TlsPolicy:
    """The connection creator for each host (``creatorForNetloc``)."""

    def __init__(
        self,
        trust_root: Any,
        sessions: int,
        ledger: TlsLedger,
        certificate_options: dict[str, Any] | None = None,
        verify: bool = True,
    ):
        self.verify = verify
        # one context for every connection: a session resumes only on the
        # context it was made on (OpenSSL)
        if verify:
            self.options = ssl.CertificateOptions(
                trustRoot=trust_root, **(certificate_options or {})
            )
        else:
            self.options = ssl.CertificateOptions(verify=False, **(certificate_options or {}))
        self.sessions = max(sessions, 0)
        self.ledger = ledger
        #: host:port -> the last session a server gave for it
        self._sessions: OrderedDict[str, SSL.Session] = OrderedDict()
        #: host:port -> its newest connection (a TLS 1.3 server sends its session
        #: ticket after the handshake: read when the next connection is made)
        self._newest: OrderedDict[str, weakref.ref[SSL.Connection]] = OrderedDict()
        #: host:port -> what its last handshake agreed on by ALPN (``spoke``)
        self._protocols: OrderedDict[str, bytes] = OrderedDict()
        #: host:port -> (its first handshake under way: done when set, since when)
        self._first: dict[str, tuple[asyncio.Event, float]] = {}

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> TlsPolicy:
        settings = crawler.settings
        bundle = settings.get("TLS_CA_BUNDLE") or ""
        trust = ssl.trustRootFromCertificates(read_bundle(bundle)) if bundle else None
        sessions = settings.getint("TLS_SESSIONS")
        verify = settings.getbool("DOWNLOAD_VERIFY_CERTIFICATES", True)
        if not verify:
            logger.warning(
                "DOWNLOAD_VERIFY_CERTIFICATES is off: HTTPS servers' certificates are "
                "not verified (anyone on the path can answer for a host)"
            )
        ciphers = settings.get("DOWNLOADER_CLIENT_TLS_CIPHERS")
        options: dict[str, Any] = {"fixBrokenPeers": True}
        if ciphers:
            options["acceptableCiphers"] = ssl.AcceptableCiphers.fromOpenSSLCipherString(ciphers)
        ledger = TlsLedger(crawler.stats)
        return cls(trust or ssl.platformTrust(), sessions, ledger, options, verify)

    def creatorForNetloc(self, hostname: bytes, port: int) -> Any:
        name = hostname.decode("ascii")
        return _Creator(self, name, f"{name.lower()}:{port}")

    def before_connecting(self, netloc: str) -> asyncio.Event | None:
        """What a request to ``netloc`` (host:port, lower case) waits for before it
        may open a connection: while a host's first handshake is under way, the
        others a node sends it at once would each pay a full one; after it, they
        resume its session. None: go (a session is known, or this is the first)."""
        if netloc in self._sessions or netloc in self._newest:
            return None
        first = self._first.get(netloc)
        now = time.monotonic()
        if first is None or now - first[1] > FIRST_WAIT:  # (one that never ended: anew)
            if len(self._first) >= max(self.sessions, 1):
                self._first.clear()  # (hosts that never answered: bounded)
            self._first[netloc] = (asyncio.Event(), now)
            return None
        return first[0]

    def session_for(self, netloc: str) -> SSL.Session | None:
        newest = self._newest.get(netloc)
        connection = newest() if newest is not None else None
        if connection is not None:
            self.keep_session(netloc, connection)
        session = self._sessions.get(netloc)
        if session is not None:
            self._sessions.move_to_end(netloc)
        return session

    def keep_session(self, netloc: str, connection: SSL.Connection) -> None:
        if not self.sessions:
            return
        try:
            session = connection.get_session()
        except SSL.Error:
            return
        if session is None:
            return
        self._sessions[netloc] = session
        self._sessions.move_to_end(netloc)
        while len(self._sessions) > self.sessions:
            old, _ = self._sessions.popitem(last=False)
            self._newest.pop(old, None)

    def spoke(self, netloc: str) -> bytes | None:
        """What protocol the last handshake with ``netloc`` agreed on by ALPN
        (b"" for none), or None before any."""
        return self._protocols.get(netloc)

    def handshake_done(self, netloc: str, host: str, connection: SSL.Connection) -> None:
        self.ledger.count(host, "resumed" if session_reused(connection) else "handshakes")
        first = self._first.pop(netloc, None)
        if first is not None:
            first[0].set()
        self._protocols[netloc] = connection.get_alpn_proto_negotiated() or b""
        self._protocols.move_to_end(netloc)
        while len(self._protocols) > max(self.sessions, 1):
            self._protocols.popitem(last=False)
        self._newest[netloc] = weakref.ref(connection)
        self._newest.move_to_end(netloc)
        while len(self._newest) > max(self.sessions, 1):
            self._newest.popitem(last=False)
        self.keep_session(netloc, connection)


@implementer(IOpenSSLClientConnectionCreator)
class _Creator:
    """A client connection for a host: SNI, this node's verification (as
    Twisted's ``optionsForClientTLS``, naming why a certificate fails), its last
    session offered, its handshake counted."""

    def __init__(self, policy: TlsPolicy, host: str, netloc: str):
        self.policy = policy
        self.host = host
        self.netloc = netloc

    def clientConnectionForTLS(self, tls: TLSMemoryBIOProtocol) -> SSL.Connection:
        # the policy's context, with ALPN for the protocol asking (HTTP/2's h2)
        connection = self.policy.options.clientConnectionForTLS(tls)
        if not (isIPAddress(self.host) or isIPv6Address(self.host)):
            connection.set_tlsext_host_name(self.host.encode("ascii"))  # SNI
        self.policy.ledger.count(self.host, "connections")
        if self.policy.verify:
            connection.set_verify(
                SSL.VERIFY_PEER | SSL.VERIFY_FAIL_IF_NO_PEER_CERT, _verifier(tls, self.host)
            )
        else:
            connection.set_verify(SSL.VERIFY_NONE, lambda *_: True)
        session = self.policy.session_for(self.netloc)
        if session is not None:
            # (a session this connection cannot take: a full handshake)
            with contextlib.suppress(SSL.Error, ValueError):
                connection.set_session(session)

        def info(conn: SSL.Connection, where: int, _ret: int) -> None:
            if where & HANDSHAKE_DONE:
                try:
                    self.policy.handshake_done(self.netloc, self.host, conn)
                except Exception:  # never raise into OpenSSL's callback
                    logger.exception("TLS handshake with %s not counted", self.host)

        connection.set_info_callback(info)
        return connection


def _verifier(tls: TLSMemoryBIOProtocol, host: str) -> Any:
    """OpenSSL's verify callback: the chain as OpenSSL judged it, and the leaf
    for ``host`` (as Twisted's own); a refusal names why."""
    service = IPAddress_ID(host) if isIPAddress(host) or isIPv6Address(host) else DNS_ID(host)
    protocol: TLSMemoryBIOProtocol | None = tls

    def verify(_conn: SSL.Connection, cert: Any, error: int, depth: int, ok: int) -> bool:
        nonlocal protocol
        try:
            reason = None
            if not ok:
                reason = VERIFY_ERRORS.get(error, f"OpenSSL verification error {error}")
            elif depth == 0:
                try:
                    verify_service_identity(extract_patterns(cert), [service], [])
                except VerificationError:
                    reason = VERIFY_ERRORS[62]
            if reason is None:
                return True
            if protocol is not None:
                subject = cert.get_subject().commonName or "?"
                protocol.failVerification(
                    Failure(CertificateRefused(f"{reason} (depth {depth}: CN={subject})"))
                )
                protocol = None  # no reference kept past the first refusal
            return False
        except Exception:  # never raise into OpenSSL's callback
            logger.exception("verifying %s's certificate", host)
            return False

    return verify
