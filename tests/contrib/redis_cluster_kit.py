"""A real Redis Cluster for tests: ``redis-server --cluster-enabled yes`` x (primaries x
(1 + replicas)) on 127.0.0.1 free ports, each node in a directory of its own, joined by
``redis-cli --cluster create``; every node stopped by its pid (``redis_kit.RedisServer``).

:class:`RedisClusterKit` is a context manager. Its ``node_timeout_ms`` (500 by default)
is Redis's ``cluster-node-timeout``: how long a primary may be silent before its replicas
start a failover. :meth:`~RedisClusterKit.primary_of` and
:meth:`~RedisClusterKit.wait_promoted` read ``CLUSTER SLOTS`` from a live node, so a test
can kill the primary of a slot and time the engine's own failover (the moment a replica
owns the slot).
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest
import redis

from tests.contrib.redis_kit import INSTALL, RedisServer, free_port

_SETTLE_S = 30  # the cluster forms within this, or the fixture fails


def _redis_cli() -> str:
    path = shutil.which("redis-cli")
    if path is None:
        pytest.fail(f"redis-cli is not installed: run `{INSTALL}` (as root)", pytrace=False)
    return path


class RedisClusterKit:
    """A Redis Cluster of ``primaries`` primaries with ``replicas`` replicas each; see the
    module doc."""

    def __init__(
        self, directory: Path, primaries: int = 3, replicas: int = 1, node_timeout_ms: int = 500
    ) -> None:
        self.primaries = primaries
        self.replicas = replicas
        self.node_timeout_ms = node_timeout_ms
        args = [
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-node-timeout",
            str(node_timeout_ms),
        ]
        self.nodes: list[RedisServer] = []
        for i in range(primaries * (1 + replicas)):
            node_dir = directory / f"node{i}"
            node_dir.mkdir()
            # the bus port on a free port of its own (by default port + 10000: maybe taken)
            bus = ["--cluster-port", str(free_port())]
            self.nodes.append(RedisServer(node_dir, extra_args=args + bus))

    @property
    def urls(self) -> list[str]:
        """Every node's URL (what a bridge takes as its startup nodes)."""
        return [f"redis://127.0.0.1:{node.port}" for node in self.nodes]

    def start(self) -> None:
        for node in self.nodes:
            node.start()
        subprocess.run(
            [
                _redis_cli(),
                "--cluster",
                "create",
                *(f"127.0.0.1:{node.port}" for node in self.nodes),
                "--cluster-replicas",
                str(self.replicas),
                "--cluster-yes",
            ],
            check=True,
            capture_output=True,
            timeout=_SETTLE_S,
        )
        self._wait_formed()

    def _wait_formed(self) -> None:
        """Until every node says cluster_state:ok and every replica's link is up."""
        deadline = time.monotonic() + _SETTLE_S
        while True:
            if all(self._ready(node) for node in self.nodes):
                return
            if time.monotonic() > deadline:
                raise TimeoutError("the Redis Cluster did not form")
            time.sleep(0.05)

    def _ready(self, node: RedisServer) -> bool:
        with self.client(node) as client:
            info = client.execute_command("CLUSTER", "INFO")
            if b"cluster_state:ok" not in info:
                return False
            replication = client.info("replication")
            return bool(
                replication["role"] == "master" or replication["master_link_status"] == "up"
            )

    def client(self, node: RedisServer) -> redis.Redis:
        return redis.Redis(port=node.port, socket_timeout=5, decode_responses=False)

    def live(self) -> list[RedisServer]:
        return [node for node in self.nodes if node.proc is not None]

    def owner_ports(self, slot: int) -> set[int]:
        """The ports of the primaries that the live nodes say own ``slot`` (each node
        asked; a node that does not answer is skipped)."""
        ports = set()
        for node in self.live():
            try:
                with self.client(node) as client:
                    ranges = client.execute_command("CLUSTER", "SLOTS")
            except redis.RedisError:
                continue
            for start, end, primary, *_ in ranges:
                if start <= slot <= end:
                    ports.add(int(primary[1]))
        return ports

    def primary_of(self, slot: int) -> RedisServer:
        (port,) = self.owner_ports(slot)
        return next(node for node in self.nodes if node.port == port)

    def wait_promoted(self, slot: int, old: RedisServer, timeout_s: float = 30.0) -> float:
        """Poll every live node (every 5 ms) until one says a node other than ``old``
        owns ``slot`` (the promoted replica says it first): the ``time.monotonic()`` it
        was first seen."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.owner_ports(slot) - {old.port}:
                return time.monotonic()
            time.sleep(0.005)
        raise TimeoutError(f"no replica took slot {slot} over in {timeout_s} s")

    def move_slot(self, slot: int, to: RedisServer) -> None:
        """Move an empty ``slot`` to the primary ``to`` (resharding, as ``redis-cli
        --cluster reshard`` does it: importing, migrating, then the new owner everywhere)."""
        source = self.primary_of(slot)
        with self.client(source) as src, self.client(to) as dst:
            src_id = src.execute_command("CLUSTER", "MYID")
            dst_id = dst.execute_command("CLUSTER", "MYID")
            dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", src_id)
            src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id)
            dst.execute_command("CLUSTER", "SETSLOT", slot, "NODE", dst_id)
            src.execute_command("CLUSTER", "SETSLOT", slot, "NODE", dst_id)

    def stop(self) -> None:
        for node in self.nodes:
            node.kill()

    def __enter__(self) -> RedisClusterKit:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
