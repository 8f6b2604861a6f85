"""A generated web of many hosts with a known ranking, served on one address.

    python -m demosite.linkweb --hosts 2000 --pages 10 [--port 0]

Host ``hN.test`` (N from 0) is a site of its own (its own registered domain)
with pages ``/`` and ``/p/1`` ... ``/p/PAGES-1``, told apart by the Host header
(a DNS server the caller runs points every name at this address). Each page
links to the next pages of its site and to the front pages of ``LINKS_OUT``
other sites, drawn with a Zipf law (the chance of host N is about 1/(N+1)):
the lower a host's number, the more sites link to it, so N is its rank in the
link graph. ``in_links(hosts, pages)`` gives the exact count of sites linking
to each host, for a test to rank by. ``GET /__hits`` on any host: the pages
fetched, per host. ``--port 0`` takes a free port; the first line printed is
``listening on URL``.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import functools
import itertools
import random
import sys
from collections import defaultdict

from aiohttp import web

from demosite.server import serve  # the demo site's: prints the URL, stops on a signal

LINKS_OUT = 3  # other sites each page links to
NEXT_PAGES = 3  # pages of its own site each page links to


@functools.cache
def _weights(hosts: int) -> list[float]:
    return list(itertools.accumulate(1 / (n + 1) for n in range(hosts)))


def out_links(host: int, page: int, hosts: int) -> list[int]:
    """The other sites page ``page`` of ``host`` links to (always the same)."""
    rng = random.Random(host * 100_003 + page)
    cumulative = _weights(hosts)
    chosen: list[int] = []
    while len(chosen) < min(LINKS_OUT, hosts - 1):
        target = bisect.bisect(cumulative, rng.random() * cumulative[-1])
        if target != host and target not in chosen:
            chosen.append(target)
    return chosen


def in_links(hosts: int, pages: int) -> list[int]:
    """How many other sites link to each host, by number."""
    linking: list[set[int]] = [set() for _ in range(hosts)]
    for host in range(hosts):
        for page in range(pages):
            for target in out_links(host, page, hosts):
                linking[target].add(host)
    return [len(sources) for sources in linking]


def host_number(header: str, hosts: int) -> int | None:
    name = header.partition(":")[0].lower()
    if not (name.startswith("h") and name.endswith(".test")):
        return None
    digits = name[1 : -len(".test")]
    return int(digits) if digits.isdigit() and int(digits) < hosts else None


def make_app(hosts: int, pages: int) -> web.Application:
    hits: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))

    async def page(request: web.Request) -> web.Response:
        if request.path == "/__hits":
            return web.json_response(hits)
        host = host_number(request.host, hosts)
        if request.path == "/":
            number = 0
        elif request.path.startswith("/p/") and request.path[3:].isdigit():
            number = int(request.path[3:])
        else:
            number = -1
        if host is None or not 0 <= number < pages:
            raise web.HTTPNotFound()
        hits[f"h{host}.test"][request.path] += 1
        port = request.host.partition(":")[2]
        own = [f"/p/{n}" for n in range(number + 1, min(number + 1 + NEXT_PAGES, pages))]
        other = [f"http://h{t}.test:{port}/" for t in out_links(host, number, hosts)]
        body = "".join(f"<a href='{href}'>{href}</a> " for href in own + other)
        title = f"h{host}.test page {number}"
        return web.Response(text=f"<html><title>{title}</title><body>{body}</body></html>",
                            content_type="text/html")  # fmt: skip

    app = web.Application()
    app.router.add_get("/{tail:.*}", page)
    return app


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--hosts", type=int, default=2000)
    parser.add_argument("--pages", type=int, default=10)
    args = parser.parse_args(argv)
    if args.hosts < 2 or args.pages < 1:
        parser.error("--hosts: 2 or more; --pages: 1 or more")
    try:
        asyncio.run(serve(args.host, args.port, make_app(args.hosts, args.pages)))
    except OSError as exc:
        sys.exit(f"link web: cannot listen on {args.host}:{args.port}: {exc}")


if __name__ == "__main__":
    main()
