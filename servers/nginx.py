"""Debian's nginx-light on loopback: a real rate limiter (``limit_req``) in front of
real pages (python3-doc), for the pushback tests and bench section 22; and a real
HTTPS server (TLS 1.3, HTTP/2) with the tests' own certificates."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

from servers.services import Service, free_port, stop

#: real HTML nobody here wrote: Debian's python3-doc (``make system-tools``)
PYTHON_DOCS = Path("/usr/share/doc/python3.11/html")

#: a worker, its files under ``workdir``: what every configuration here starts with
HEAD = """
worker_processes 1;
error_log {workdir}/error.log warn;
pid {workdir}/nginx.pid;
events {{ worker_connections 256; }}
http {{
"""
#: after the access log's format: where it and nginx's temporary files go
FILES = """    access_log {workdir}/access.log answers;
    client_body_temp_path {workdir}/tmp; proxy_temp_path {workdir}/tmp;
    fastcgi_temp_path {workdir}/tmp; uwsgi_temp_path {workdir}/tmp; scgi_temp_path {workdir}/tmp;
    types {{ text/html html; text/css css; application/javascript js; }}
"""

NGINX_CONF = (
    HEAD
    + """    log_format answers '$msec $status $request_uri';
"""
    + FILES
    + """    limit_req_zone $binary_remote_addr zone=pages:1m rate={rate}r/s;
    limit_req_status 429;
    server {{
        listen {host}:{port};
        root {root};
        location = /robots.txt {{ return 200 "User-agent: *\\nAllow: /\\n"; }}
        location / {{
            limit_req zone=pages burst={burst} nodelay;
            error_page 429 = @refused;
        }}
        location @refused {{
            add_header Retry-After {retry_after} always;
            return 429 "too many requests";
        }}
    }}
}}
"""
)


def nginx_binary() -> str | None:
    """Debian's nginx, where ``make system-tools`` installs it, or None."""
    found = shutil.which("nginx")
    if found:
        return found
    return "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None


def docs_server_missing() -> str | None:
    """Why Python's docs cannot be served here (python3-doc or nginx missing), or None."""
    if PYTHON_DOCS.is_dir() and nginx_binary():
        return None
    return "python3-doc or nginx-light is not installed (make system-tools)"


def start_nginx(
    workdir: Path,
    root: Path,
    *,
    rate: int,
    burst: int,
    retry_after: int = 3,
    host: str = "127.0.0.1",
) -> Service:
    """Debian's nginx serving ``root`` behind its ``limit_req`` at ``rate``
    requests/s (``burst`` more at once), answering 429 with ``Retry-After``
    above it, as many real sites do; its access log ``access.log`` in
    ``workdir`` has each answer's time, status and path."""
    binary = shutil.which("nginx") or "/usr/sbin/nginx"
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "tmp").mkdir(exist_ok=True)
    port = free_port()
    conf = workdir / "nginx.conf"
    conf.write_text(NGINX_CONF.format(workdir=workdir, rate=rate, burst=burst, root=root,
                                      retry_after=retry_after, host=host, port=port))  # fmt: skip
    return _serve(binary, conf, workdir, f"http://{host}:{port}")


TLS_CONF = (
    HEAD
    + """    log_format answers '$msec $status $request_uri $host $ssl_session_reused '
                       '$connection $server_protocol';
"""
    + FILES
    + """    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_session_cache shared:tls:1m;
    ssl_session_tickets on;
    keepalive_requests {keepalive_requests};
{servers}
}}
"""
)

TLS_SERVER = """
    server {{
        listen {host}:{port}{ssl}{http2};
        server_name {name};
        {certificates}
        root {root};
        location = /robots.txt {{ return 200 "User-agent: *\\nAllow: /\\n"; }}
        {copies}
    }}
"""


def start_tls_nginx(
    workdir: Path,
    root: Path,
    sites: dict[str, object],
    *,
    host: str = "127.0.0.1",
    http2: bool = True,
    keepalive_requests: int = 1000,
    tls: bool = True,
    copies: tuple[str, ...] = (),
) -> Service:
    """Debian's nginx serving ``root`` over HTTPS (TLS 1.3 and 1.2; HTTP/2 too
    when ``http2``) on one port, for each name in ``sites`` with its certificate
    (a ``certificates.Issued``), chosen by SNI. Its ``access.log`` in ``workdir``
    has each answer's time, status, path, host, whether the TLS session was
    resumed (``r``), the connection's serial number and the HTTP version.
    ``tls=False``: the same over plain HTTP (``sites`` names only). ``copies``:
    ``root`` served again under each of those paths (``/a/``: a site twice as big)."""
    binary = shutil.which("nginx") or "/usr/sbin/nginx"
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "tmp").mkdir(exist_ok=True)
    port = free_port()
    servers = ""
    for name, issued in sites.items():
        certificates = ""
        if tls:
            certificates = f"ssl_certificate {issued.cert}; ssl_certificate_key {issued.key};"  # type: ignore[attr-defined]
        servers += TLS_SERVER.format(host=host, port=port, ssl=" ssl" if tls else "",
                                     http2=" http2" if tls and http2 else "", name=name,
                                     root=root, certificates=certificates,
                                     copies=" ".join(f"location /{copy}/ {{ alias {root}/; }}"
                                                     for copy in copies))  # fmt: skip
    conf = workdir / "nginx.conf"
    conf.write_text(TLS_CONF.format(workdir=workdir, servers=servers,
                                    keepalive_requests=keepalive_requests))  # fmt: skip
    return _serve(binary, conf, workdir, f"{'https' if tls else 'http'}://{host}:{port}")


def _serve(binary: str, conf: Path, workdir: Path, url: str) -> Service:
    """nginx started on ``conf``, once it listens at ``url``'s address."""
    proc = subprocess.Popen(
        [binary, "-c", str(conf), "-p", str(workdir), "-g", "daemon off;"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    host, port = url.split("//")[1].rsplit(":", 1)
    _wait_listening(proc, host, int(port))
    return Service(proc, url, "nginx")


def _wait_listening(proc: subprocess.Popen, host: str, port: int) -> None:
    deadline = time.time() + 10
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"nginx did not start: {proc.stderr.read().decode()[-500:]}")
        try:
            with socket.create_connection((host, port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    stop(proc)
    raise RuntimeError("nginx did not listen within 10 s")
