"""A small authoritative DNS server on loopback: names a test or a demo controls.

    python -m servers.dns_server --zone zone.json --log queries.log [--port 0]

``zone.json`` maps names to what they answer: ``{"shop.test": {"a": ["127.0.0.1"],
"ttl": 300}, "six.test": {"aaaa": ["::1"]}, "broken.test": "servfail",
"slow.test": "silent"}``; any other name is NXDOMAIN. The file is read again at
every query, so a test can move a name. Each query is one line of the log
(``NAME TYPE``). The first line printed is ``listening on IP:PORT`` (UDP).
"""

from __future__ import annotations

import argparse
import json
import signal
from pathlib import Path

from twisted.internet import defer, reactor
from twisted.names import dns, error, server
from twisted.names.common import ResolverBase


class Zone(ResolverBase):
    def __init__(self, zone: Path, log: Path):
        super().__init__()
        self.zone = zone
        self.log = log

    def _lookup(self, name, cls, kind, timeout):
        host = name.decode() if isinstance(name, bytes) else str(name)
        host = host.lower().rstrip(".")
        with self.log.open("a") as log:
            log.write(f"{host} {dns.QUERY_TYPES.get(kind, kind)}\n")
        entry = json.loads(self.zone.read_text()).get(host)
        if entry is None:
            return defer.fail(error.DNSNameError(host))
        if entry == "servfail":
            # any failure but a name error is answered SERVFAIL (DNSServerFactory)
            return defer.fail(RuntimeError(f"{host} fails on purpose"))
        if entry == "silent":
            return defer.Deferred()  # never answered: the client times out
        ttl = int(entry.get("ttl", 300))
        field, record = ("a", dns.Record_A) if kind == dns.A else ("aaaa", dns.Record_AAAA)
        if kind not in (dns.A, dns.AAAA):
            return defer.succeed(([], [], []))
        answers = [
            dns.RRHeader(host.encode(), kind, dns.IN, ttl, record(address, ttl), auth=True)
            for address in entry.get(field, [])
        ]
        return defer.succeed((answers, [], []))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zone", type=Path, required=True)
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    factory = server.DNSServerFactory(authorities=[Zone(args.zone, args.log)])
    port = reactor.listenUDP(args.port, dns.DNSDatagramProtocol(factory), interface=args.host)
    print(f"listening on {args.host}:{port.getHost().port}", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: reactor.callFromThread(reactor.stop))
    reactor.run()


if __name__ == "__main__":
    main()
