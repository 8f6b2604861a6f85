"""A small HTTP forward proxy on 127.0.0.1, for the tests and ``make bench``.

    python -m servers.forward_proxy --port 0 [--auth user:pass]

Forwards plain-HTTP requests in absolute form (``GET http://host/path``), one
request per connection. With ``--auth`` it answers 407 unless the request
carries that ``Proxy-Authorization: Basic``. ``GET /__proxied`` (sent directly,
not through the proxy) lists the URLs it forwarded and the User-Agent of each.
The first line printed is ``listening on http://127.0.0.1:PORT``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import signal
from urllib.parse import urlsplit

MAX_HEADER_BYTES = 64 * 1024


class ForwardProxy:
    def __init__(self, auth: str = ""):
        self.expected = "Basic " + base64.b64encode(auth.encode()).decode() if auth else ""
        self.log: list[dict[str, str]] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            writer.close()
            return
        lines = head.decode("latin-1").split("\r\n")
        method, target, _version = lines[0].split(" ", 2)
        headers = [line.split(":", 1) for line in lines[1:] if ":" in line]
        fields = {name.strip().lower(): value.strip() for name, value in headers}
        body = await reader.readexactly(int(fields.get("content-length", "0") or 0))
        if target == "/__proxied":
            await self._reply(writer, 200, json.dumps(self.log).encode(), "application/json")
            return
        if self.expected and fields.get("proxy-authorization") != self.expected:
            await self._reply(writer, 407, b"proxy authentication required",
                              extra="Proxy-Authenticate: Basic realm=\"test\"\r\n")  # fmt: skip
            return
        parts = urlsplit(target)
        if parts.scheme != "http" or not parts.hostname:
            await self._reply(writer, 400, b"only absolute http:// URLs are forwarded")
            return
        self.log.append({"url": target, "user_agent": fields.get("user-agent", "")})
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(
                parts.hostname, parts.port or 80
            )
        except OSError:
            await self._reply(writer, 502, b"upstream unreachable")
            return
        path = parts.path or "/"
        if parts.query:
            path += "?" + parts.query
        skip = {"proxy-authorization", "proxy-connection", "connection", "keep-alive"}
        out = [f"{method} {path} HTTP/1.1"]
        out += [f"{name.strip()}: {value.strip()}" for name, value in headers
                if name.strip().lower() not in skip]  # fmt: skip
        out.append("Connection: close")
        upstream_writer.write(("\r\n".join(out) + "\r\n\r\n").encode("latin-1") + body)
        await upstream_writer.drain()
        response = await upstream_reader.read()
        upstream_writer.close()
        writer.write(response)
        await writer.drain()
        writer.close()

    async def _reply(
        self, writer, status: int, body: bytes, content_type: str = "text/plain", extra: str = ""
    ) -> None:
        head = (f"HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\n{extra}"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n")  # fmt: skip
        writer.write(head.encode() + body)
        await writer.drain()
        writer.close()


async def serve(port: int, auth: str) -> None:
    proxy = ForwardProxy(auth)
    server = await asyncio.start_server(proxy.handle, "127.0.0.1", port)
    bound = server.sockets[0].getsockname()[1]
    print(f"listening on http://127.0.0.1:{bound}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--auth", default="", help="user:pass the clients must send")
    args = parser.parse_args()
    asyncio.run(serve(args.port, args.auth))


if __name__ == "__main__":
    main()
