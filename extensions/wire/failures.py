"""What a failed HTTPS download says of TLS: a certificate refused (dead-lettered
at once as ``tls_error``, with the reason: trying again meets the same
certificate), or a server that does not speak HTTP/2 (``handlers.py`` asks it
again over HTTP/1.1)."""

from __future__ import annotations

from collections.abc import Iterator

from extensions.wire.tls import CertificateRefused

#: Scrapy's HTTP/2 client's error for a server whose ALPN did not choose h2
NOT_H2 = "InvalidNegotiatedProtocol"
#: OpenSSL's, for a server that refuses the handshake for want of h2 (TLS alert 120)
NO_PROTOCOL_ALERT = "no application protocol"


def _causes(exception: BaseException, depth: int = 0) -> Iterator[BaseException]:
    """The exception, what it wraps (Twisted's ``reasons``, Python's causes)."""
    if depth > 8:
        return
    yield exception
    for failure in getattr(exception, "reasons", None) or ():
        value = getattr(failure, "value", None)
        if isinstance(value, BaseException):
            yield from _causes(value, depth + 1)
    for linked in (exception.__cause__, exception.__context__):
        if linked is not None:
            yield from _causes(linked, depth + 1)


def tls_failure(exception: BaseException) -> str | None:
    """Why a server's certificate was refused, or None for any other failure."""
    for cause in _causes(exception):
        if isinstance(cause, CertificateRefused):
            return str(cause)
    return None


def not_http2(exception: BaseException) -> bool:
    """Whether a download failed because its server would not speak HTTP/2."""
    return any(
        type(cause).__name__ == NOT_H2 or NO_PROTOCOL_ALERT in str(cause)
        for cause in _causes(exception)
    )
