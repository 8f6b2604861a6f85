"""The deploy/ files: docker-compose.yml checked by docker-compose, the Dockerfile
by hadolint, the entrypoint run for real. No container engine runs here."""

import configparser
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from servers import services
from tests.conftest import ROOT

pytestmark = pytest.mark.spawns  # scrapy commands and tools, no server fixture

DEPLOY = ROOT / "deploy"
SECRETS = {"REDIS_PASSWORD": "r-pw", "MONGO_PASSWORD": "m-pw", "SCRAPYD_PASSWORD": "s-pw",
           "CONSOLE_PASSWORD": "c-pw"}  # fmt: skip


def compose(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    binary = shutil.which("docker-compose")
    if binary is None:
        pytest.skip("docker-compose is not installed (make system-tools installs it as root)")
    clean = {k: v for k, v in os.environ.items() if k not in SECRETS}
    return subprocess.run(
        [binary, "-f", str(DEPLOY / "docker-compose.yml"), *args],
        capture_output=True, text=True, timeout=60, env={**clean, **env},
    )  # fmt: skip


def test_compose_file_is_valid_and_wires_the_cluster():
    result = compose("config", env=SECRETS)
    assert result.returncode == 0, result.stderr
    config = yaml.safe_load(result.stdout)
    services = config["services"]
    assert {"redis", "mongo", "scrapyd-1", "scrapyd-2"} <= set(services)
    redis_command = services["redis"]["command"]
    assert "--appendonly" in redis_command and "r-pw" in redis_command
    assert services["mongo"]["environment"]["MONGO_INITDB_ROOT_PASSWORD"] == "m-pw"
    # a scrapyd node with a browser: the same wiring, the render image
    assert services["scrapyd-render-1"]["build"]["target"] == "scrapyd-render"
    for node in ("scrapyd-1", "scrapyd-2", "scrapyd-render-1"):
        environment = services[node]["environment"]
        assert environment["REDIS_URL"] == "redis://:r-pw@redis:6379/0"
        assert environment["MONGO_URI"].startswith("mongodb://crawler:m-pw@mongo:27017/")
        assert environment["SCRAPYD_PASSWORD"] == "s-pw"
    # the web console: its own image target, behind a password, on loopback of the host
    console = services["console"]
    assert console["build"]["target"] == "console"
    assert console["environment"]["CONSOLE_PASSWORD"] == "c-pw"
    assert console["environment"]["REDIS_URL"] == "redis://:r-pw@redis:6379/0"
    assert all("127.0.0.1" in str(port) for port in console["ports"])


def test_compose_refuses_to_start_without_secrets():
    result = compose("config", env={})
    assert result.returncode != 0
    assert "set REDIS_PASSWORD" in result.stderr or "set MONGO_PASSWORD" in result.stderr


def test_dockerfile_passes_hadolint():
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    result = subprocess.run([hadolint, str(DEPLOY / "Dockerfile")], capture_output=True,
                            text=True, timeout=60)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


def test_entrypoint_writes_the_login_for_scrapyd_only(tmp_path):
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path),
           "SCRAPYD_USERNAME": "ops", "SCRAPYD_PASSWORD": "pw"}  # fmt: skip
    result = subprocess.run([str(DEPLOY / "entrypoint.sh"), "true"], env=env,
                            capture_output=True, text=True, timeout=30)  # fmt: skip
    assert result.returncode == 0, result.stderr
    written = tmp_path / ".scrapyd.conf"
    assert written.read_text() == (
        "[scrapyd]\nbind_address = 0.0.0.0\nusername = ops\npassword = pw\n"
    )
    assert stat.S_IMODE(written.stat().st_mode) == 0o600
    show = ["sh", "-c", "echo $DENY_PRIVATE_NETWORKS"]
    deny = subprocess.run([str(DEPLOY / "entrypoint.sh"), *show], env=env,
                          capture_output=True, text=True, timeout=30)  # fmt: skip
    assert deny.stdout.strip() == "True"  # a node in a container fetches the public web only
    del env["SCRAPYD_PASSWORD"]
    refused = subprocess.run([str(DEPLOY / "entrypoint.sh"), "true"], env=env,
                             capture_output=True, text=True, timeout=30)  # fmt: skip
    assert refused.returncode != 0
    assert "set SCRAPYD_PASSWORD" in refused.stderr


def test_no_shipped_scrapyd_config_runs_without_a_login_on_all_interfaces():
    shipped = configparser.ConfigParser()
    shipped.read(DEPLOY / "scrapyd.conf")
    section = shipped["scrapyd"]
    assert section.get("bind_address") == "127.0.0.1" or section.get("password")


def test_make_scrapyd_refuses_an_empty_or_missing_password(tmp_path):
    for password in ("", None):
        env = {k: v for k, v in os.environ.items() if k != "SCRAPYD_PASSWORD"}
        if password is not None:
            env["SCRAPYD_PASSWORD"] = password
        result = subprocess.run(
            [sys.executable, "-m", "tools.scrapyd_node", "--port", str(services.free_port())],
            cwd=services.ROOT, env=env, capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        assert result.returncode == 1
        assert "set SCRAPYD_PASSWORD" in result.stderr


def test_generated_scrapyd_config_is_readable_by_its_owner_only(tmp_path):
    path = services.write_scrapyd_conf(tmp_path, port=6800, username="ops", password="pw")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert "password = pw" in path.read_text()
    with pytest.raises(ValueError, match="password"):
        services.write_scrapyd_conf(tmp_path, port=6800, username="ops", password="")
