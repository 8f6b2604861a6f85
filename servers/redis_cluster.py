"""A Redis Cluster on loopback, for the sharding tests and bench sections."""

from __future__ import annotations

import socket
from pathlib import Path

from servers.clients import redis_at
from servers.services import Service, free_port, start_redis, wait_until


class RedisCluster:
    """A Redis Cluster on loopback; ``url`` is the first primary's.

    ``replicas[n]`` is the replica of ``nodes[n]`` when the cluster was started
    with replicas."""

    def __init__(self, nodes: list[Service], replicas: list[Service] | None = None):
        self.nodes = nodes
        self.replicas = replicas or []
        self.url = nodes[0].url

    def stop(self) -> None:
        for node in self.nodes + self.replicas:
            node.stop()


def start_redis_cluster(
    workdir: Path, primaries: int = 3, *, replicas: bool = False, node_timeout_ms: int = 5000
) -> RedisCluster:
    """Primaries that share the 16,384 hash slots evenly; with ``replicas``, one
    replica per primary, connected and in sync before this returns."""
    nodes: list[Service] = []
    copies: list[Service] = []
    cluster_args = ("--cluster-enabled", "yes", "--cluster-node-timeout", str(node_timeout_ms))
    try:
        for n in range(primaries):
            nodes.append(
                start_redis(workdir / f"node-{n}", _port_with_free_bus(), extra_args=cluster_args)
            )
            if replicas:
                copies.append(
                    start_redis(
                        workdir / f"replica-{n}", _port_with_free_bus(), extra_args=cluster_args
                    )
                )
        clients = [redis_at(node.url, socket_timeout=5) for node in nodes]
        replica_clients = [redis_at(node.url, socket_timeout=5) for node in copies]
        first = clients[0]
        for client in clients[1:] + replica_clients:
            port = client.connection_pool.connection_kwargs["port"]
            first.execute_command("CLUSTER", "MEET", "127.0.0.1", port)
        share = 16384 // primaries
        for n, client in enumerate(clients):
            last = 16383 if n == primaries - 1 else (n + 1) * share - 1
            client.execute_command("CLUSTER", "ADDSLOTS", *range(n * share, last + 1))

        def agreed() -> bool:
            for client in clients + replica_clients:
                if b"cluster_state:ok" not in client.execute_command("CLUSTER", "INFO"):
                    return False
                if len(client.execute_command("CLUSTER", "SLOTS")) != primaries:
                    return False
            return True

        wait_until(agreed, 30, "Redis Cluster agreeing on its slots")
        for primary, replica in zip(clients, replica_clients, strict=False):
            node_id = primary.execute_command("CLUSTER", "MYID")
            # a replica must know its primary's id before it may follow it
            wait_until(
                lambda replica=replica, node_id=node_id: replica.execute_command(
                    "CLUSTER", "REPLICATE", node_id
                ),
                30,
                "a replica following its primary",
            )

        def in_sync() -> bool:
            return all(
                client.info("replication").get("master_link_status") == "up"
                for client in replica_clients
            )

        wait_until(in_sync, 30, "replicas in sync with their primaries")
        for client in clients + replica_clients:
            client.close()
    except BaseException:
        for node in nodes + copies:
            node.stop()
        raise
    return RedisCluster(nodes, copies)


def _port_with_free_bus() -> int:
    """A free port whose cluster bus port (port + 10000) is free too."""
    for _ in range(100):
        port = free_port()
        if port + 10000 > 65535:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        return port
    raise RuntimeError("no free port pair for a Redis Cluster node")
