import subprocess
import sys
from pathlib import Path

import pytest
import redis

from extensions import connection
from extensions.exceptions import RedisUnavailable
from servers import services
from servers.clients import redis_at


def test_mask_url_hides_only_the_password():
    assert connection.mask_url("redis://:s3cret@host:6380/2") == "redis://:***@host:6380/2"
    assert connection.mask_url("rediss://user:pw@host/0") == "rediss://user:***@host/0"
    assert connection.mask_url("redis://host:6379/0") == "redis://host:6379/0"


def test_unreachable_redis_is_one_clear_error_without_the_password():
    port = services.free_port()
    with pytest.raises(RedisUnavailable) as error:
        connection.connect(f"redis://:topsecret@127.0.0.1:{port}/0", connect_timeout=2)
    message = str(error.value)
    assert f"127.0.0.1:{port}" in message
    assert "topsecret" not in message
    assert "***" in message


def test_invalid_url_is_refused():
    with pytest.raises(RedisUnavailable, match="invalid REDIS_URL"):
        connection.connect("http://127.0.0.1:6379/0")


def test_tls_url_builds_a_tls_client():
    client = connection.connect("rediss://127.0.0.1:6390/0", ping=False)
    assert client.connection_pool.connection_class is redis.SSLConnection


@pytest.fixture
def password_redis(tmp_path):
    service = services.start_redis(tmp_path / "pw", password="pa:ss")
    yield service
    service.stop()


def test_password_and_database_number(password_redis):
    port = password_redis.url.rsplit(":", 1)[1].split("/")[0]
    client = connection.connect(f"redis://:pa%3Ass@127.0.0.1:{port}/3")
    client.set("probe", "1")
    assert client.connection_pool.connection_kwargs["db"] == 3
    assert client.get("probe") == b"1"
    with pytest.raises(RedisUnavailable, match="refused the credentials") as error:
        connection.connect(f"redis://:wrong@127.0.0.1:{port}/0")
    assert "wrong" not in str(error.value)


@pytest.mark.spawns  # its own Redis
def test_what_redis_refuses_is_the_entrys_fault_only_when_the_server_is_well(tmp_path):
    """An entry Redis refuses is dead-lettered, so a full, read-only or gone
    server must never count as a bad entry."""
    server = services.start_redis(tmp_path / "redis")
    client = redis_at(server.url)
    try:

        def error_of(*command) -> Exception:
            try:
                client.execute_command(*command)
            except redis.RedisError as exc:
                return exc
            raise AssertionError(f"{command} was accepted")

        assert connection.is_bad_input(error_of("ZADD", "q", "not-a-number", "m"))
        client.config_set("maxmemory", 1)  # full: noeviction refuses writes (OOM)
        assert not connection.is_bad_input(error_of("SET", "k", "v"))
        client.config_set("maxmemory", 0)
        client.execute_command("REPLICAOF", "127.0.0.1", services.free_port())
        assert not connection.is_bad_input(error_of("SET", "k", "v"))  # READONLY
        client.execute_command("REPLICAOF", "NO", "ONE")
        server.stop()
        assert not connection.is_bad_input(error_of("SET", "k", "v"))  # connection lost
    finally:
        client.close()
        server.stop()


def test_a_mongodb_error_is_matched_where_it_is_met():
    from pymongo.errors import AutoReconnect

    with pytest.raises(AutoReconnect):
        try:
            raise AutoReconnect("the server went away")
        except connection.mongo_error():
            raise
        except Exception:  # what the test must not reach
            pytest.fail("a pymongo error was not matched")


@pytest.mark.spawns  # a fresh interpreter: this one has pymongo from other tests
def test_a_node_that_stores_no_item_in_mongodb_starts_without_pymongo():
    modules = ("extensions.addon", "extensions.warc.middleware", "extensions.warc.part",
               "extensions.pipelines.itemstore", "extensions.frontier.scheduler")  # fmt: skip
    code = f"import sys; import {', '.join(modules)}; print('pymongo' in sys.modules)"
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=root, check=True, timeout=60)  # fmt: skip
    assert out.stdout.strip() == "False"
