"""A TCP forwarder on 127.0.0.1 that holds every reply for a while: a Redis on
loopback made to answer like one across a network.

    python -m servers.latency_proxy --target 127.0.0.1:6379 --delay-ms 1 --port 0

Replies keep their order and are delayed from their own arrival, so pipelined
traffic is not slowed further than one delay. asyncio's timers have millisecond
granularity, so measure the round trip rather than trust ``--delay-ms``. The
first line printed is ``listening on redis://127.0.0.1:PORT/0``. Used by
``make bench``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal


async def _forward(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float):
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def send() -> None:
        while True:
            due, data = await queue.get()
            if not data:
                break
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()
        writer.close()

    sender = asyncio.create_task(send())
    with contextlib.suppress(ConnectionError):
        while data := await reader.read(65536):
            queue.put_nowait((loop.time() + delay, data))
    queue.put_nowait((0.0, b""))
    with contextlib.suppress(ConnectionError):
        await sender


async def serve(target_host: str, target_port: int, delay: float, port: int) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(
                target_host, target_port
            )
        except OSError:
            writer.close()
            return
        await asyncio.gather(
            _forward(reader, upstream_writer, 0.0), _forward(upstream_reader, writer, delay)
        )

    server = await asyncio.start_server(handle, "127.0.0.1", port)
    bound = server.sockets[0].getsockname()[1]
    print(f"listening on redis://127.0.0.1:{bound}/0", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", required=True, help="host:port to forward to")
    parser.add_argument("--delay-ms", type=float, default=1.0, help="delay of each reply")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    host, _, port = args.target.rpartition(":")
    asyncio.run(serve(host, int(port), args.delay_ms / 1000, args.port))


if __name__ == "__main__":
    main()
