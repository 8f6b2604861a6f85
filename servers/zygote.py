"""``scrapy`` processes for the tests, forked from one that imported Scrapy once.

A node or a ``scrapy`` command spends a second of CPU importing Scrapy, Twisted,
lxml and the rest before it does anything; the suite starts hundreds of them on
two cores. A zygote (one per test worker) imports those libraries, nothing of
the project's, and forks a child per process asked for: the child takes the
caller's working directory, environment and files, starts a session of its own
and runs ``scrapy.cmdline.execute`` as ``python -m scrapy`` would. It is a real
process with its own pid (signals reach it; its browsers are its children), and
the zygote reports its exit status over the connection that asked for it.

An environment that changes how the interpreter itself starts (``LD_PRELOAD``
for faketime, ``PYTHON*`` other than ``PYTHONPATH``) is not one a fork can
give: ``spawn`` then says so and the caller starts the process as usual.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

#: the libraries a node or command imports anyway; nothing that installs a
#: reactor or starts a thread, and nothing of the project's (its code may change
#: between tests, and may read the environment as it is imported)
PRELOAD = (
    "scrapy", "scrapy.http", "scrapy.crawler", "scrapy.cmdline", "scrapy.spiders",
    "scrapy.commands.crawl", "scrapy.core.downloader.handlers.http11",
    "scrapy.core.downloader.contextfactory", "scrapy.utils.test", "twisted.web.client",
    "twisted.names.dns", "redis", "tldextract", "lxml.html", "parsel", "w3lib.url",
    "itemadapter", "OpenSSL.SSL", "cryptography.hazmat.primitives.asymmetric.ed25519",
    "prometheus_client", "http_sf", "warcio", "h2.connection",
)  # fmt: skip
#: environment variables a forked child cannot honour (read as the interpreter starts)
NOT_FORKABLE = ("LD_", "FAKETIME", "PYTHONHOME", "PYTHONSAFEPATH", "PYTHONNOUSERSITE")
#: seconds the zygote may take to start
START_TIMEOUT = 60.0


class NotForkable(Exception):
    """The process asked for must be started the usual way."""


def forkable(env: dict[str, str]) -> bool:
    ours = {k: v for k, v in os.environ.items() if k.startswith(NOT_FORKABLE)}
    theirs = {k: v for k, v in env.items() if k.startswith(NOT_FORKABLE)}
    python = {k: v for k, v in env.items() if k.startswith("PYTHON") and k != "PYTHONPATH"}
    ours_python = {k: v for k, v in os.environ.items()
                   if k.startswith("PYTHON") and k != "PYTHONPATH"}  # fmt: skip
    return ours == theirs and python == ours_python


# --- the zygote -------------------------------------------------------------------


def _child(request: dict[str, Any], fds: list[int]) -> None:
    """In the forked child: become the process asked for, run it, exit."""
    for number in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):  # (SIGPIPE stays ignored)
        signal.signal(number, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.setsid()
    for target, fd in enumerate(fds):
        if fd != target:
            os.dup2(fd, target)
            os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    extra = [p for p in request["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:] = [request["cwd"], *extra, *(p for p in sys.path[1:] if p not in extra)]
    sys.argv = [request["argv0"], *request["args"]]
    code: Any = 0
    try:
        from scrapy.cmdline import execute

        execute(sys.argv)
    except SystemExit as exit_:
        code = exit_.code
    except BaseException:  # as the interpreter would say it
        import traceback

        traceback.print_exc()
        code = 1
    sys.exit(code)  # the interpreter's own end: atexit, buffers flushed


def serve(path: str) -> None:
    """The zygote's loop: a request per connection, answered with the child's
    pid, then its wait status once it ends."""
    for name in PRELOAD:
        __import__(name)
    parent = os.getppid()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    print("ready", flush=True)
    waiting: dict[int, socket.socket] = {}  # child pid -> the connection that asked
    while os.getppid() == parent:
        readable, _, _ = select.select([listener], [], [], 0.05)
        if readable:
            conn, _ = listener.accept()
            try:
                message, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
                request = json.loads(message)
            except (OSError, ValueError):
                conn.close()
                continue
            pid = os.fork()
            if pid == 0:
                listener.close()
                conn.close()
                for other in waiting.values():
                    other.close()
                _child(request, fds)
            for fd in fds:
                os.close(fd)
            waiting[pid] = conn
            conn.sendall(f"pid {pid}\n".encode())
        while waiting:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            conn = waiting.pop(pid, None)
            if conn is not None:
                with contextlib.suppress(OSError):  # the caller may have gone away
                    conn.sendall(f"exit {os.waitstatus_to_exitcode(status)}\n".encode())
                conn.close()


# --- the caller's side --------------------------------------------------------------


class ForkedProcess:
    """A ``subprocess.Popen`` of the kind the tests use: pid, poll, wait, signals."""

    def __init__(self, conn: socket.socket, args: list[str]):
        self._conn = conn
        self.args = args
        self.returncode: int | None = None
        self._buffer = b""
        self.pid = int(self._line(START_TIMEOUT).split()[1])

    def _line(self, timeout: float | None) -> str:
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = None if deadline is None else max(deadline - time.monotonic(), 0)
            self._conn.settimeout(left)
            try:
                chunk = self._conn.recv(4096)
            except (TimeoutError, BlockingIOError):  # (a timeout of 0: non-blocking)
                raise subprocess.TimeoutExpired(self.args, timeout or 0) from None
            if not chunk:
                raise OSError("the zygote went away")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode()

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                self.wait(0.0001)
            except subprocess.TimeoutExpired:
                return None
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = int(self._line(timeout).split()[1])
            self._conn.close()
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class Zygote:
    def __init__(self, workdir: Path):
        workdir.mkdir(parents=True, exist_ok=True)
        self.path = str(workdir / f"zygote-{os.getpid()}.sock")
        if os.path.exists(self.path):
            os.unlink(self.path)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "servers.zygote", self.path],
            cwd=Path(__file__).resolve().parent.parent,
            stdout=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], START_TIMEOUT)
        if not ready or self.proc.stdout.readline().strip() != "ready":
            self.proc.kill()
            raise RuntimeError("the zygote did not start")

    def spawn(self, args: list[str], *, cwd: Path | str, env: dict[str, str],
              stdin: int, stdout: int, stderr: int) -> ForkedProcess:  # fmt: skip
        """``python -m scrapy ARGS`` in ``cwd`` with ``env`` and these three
        descriptors (the caller's to close); NotForkable when it must be
        started the usual way."""
        if not forkable(env) or self.proc.poll() is not None:
            raise NotForkable()
        spec = importlib.util.find_spec("scrapy.__main__")  # sys.argv[0] of python -m scrapy
        argv0 = spec.origin if spec is not None and spec.origin else "scrapy"
        request = {"args": args, "cwd": str(cwd), "env": env, "argv0": argv0}
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(self.path)
        socket.send_fds(conn, [json.dumps(request).encode()], [stdin, stdout, stderr])
        return ForkedProcess(conn, ["scrapy", *args])

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(10)
        if os.path.exists(self.path):
            os.unlink(self.path)
        with contextlib.suppress(OSError):
            os.rmdir(os.path.dirname(self.path))


#: whether ``start_node`` (and the tests' ``scrapy`` commands) fork their
#: processes from a zygote (``servers/zygote.py``), started at the first need
_zygote_wanted = False
_zygote: Zygote | None = None


def use_zygote() -> None:
    """Fork nodes from a process that imported Scrapy once: a second of CPU less
    for each (the tests; the demo and the bench start theirs as users do)."""
    global _zygote_wanted
    _zygote_wanted = True


def the_zygote() -> Zygote | None:
    global _zygote
    if _zygote_wanted and (_zygote is None or _zygote.proc.poll() is not None):
        import tempfile

        _zygote = Zygote(Path(tempfile.mkdtemp(prefix="zygote-")))
    return _zygote


def run(args: list[str], *, cwd: Path | str, env: dict[str, str], stdin: str | None,
        timeout: float) -> subprocess.CompletedProcess | None:  # fmt: skip
    """``python -m scrapy ARGS`` forked and waited for, its output captured as
    ``subprocess.run`` captures it; None when no zygote is wanted or the process
    cannot be forked (then the caller runs it the usual way)."""
    import tempfile

    forks = the_zygote()
    if forks is None:
        return None
    with tempfile.TemporaryFile() as given, tempfile.TemporaryFile() as out, \
            tempfile.TemporaryFile() as err:  # fmt: skip
        given.write((stdin or "").encode())
        given.seek(0)
        try:
            proc = forks.spawn(args, cwd=cwd, env=env, stdin=given.fileno(),
                               stdout=out.fileno(), stderr=err.fileno())  # fmt: skip
        except NotForkable:
            return None
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
            raise
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(
            [sys.executable, "-m", "scrapy", *args], proc.returncode,
            out.read().decode("utf-8", "replace"), err.read().decode("utf-8", "replace"),
        )  # fmt: skip


def stop_zygote() -> None:
    global _zygote
    if _zygote is not None:
        _zygote.stop()
        _zygote = None


if __name__ == "__main__":
    serve(sys.argv[1])
