"""A host's registered domain, from the Public Suffix List.

``publicsuffixlist`` ships the list in its wheel (nothing is downloaded at run
time; a newer release of it brings a newer list) and counts the list's private
suffixes as registries, as browsers do: ``alice.github.io`` and
``bob.github.io`` are two sites, ``a.example.co.uk`` and ``b.example.co.uk`` one.
"""

from __future__ import annotations

import functools
import ipaddress

from publicsuffixlist import PublicSuffixList

HOSTS_REMEMBERED = 65_536  # hosts whose domain is kept at hand, per process


@functools.cache
def _suffixes() -> PublicSuffixList:
    # read once per process, when a domain is first asked for (about 0.2 s)
    return PublicSuffixList()


@functools.lru_cache(maxsize=HOSTS_REMEMBERED)
def registered_domain(host: str) -> str:
    """``example.co.uk`` for ``www.example.co.uk``, ``alice.github.io`` for
    ``www.alice.github.io``. An IP address, a name that is itself a public
    suffix (``co.uk``, ``localhost``) or one the list cannot read (``a..b``)
    is its own domain. ``host`` is lower-case, as ``urlsplit().hostname`` gives it."""
    host = host.rstrip(".")
    if not host or _is_address(host):
        return host
    return _suffixes().privatesuffix(host) or host


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
