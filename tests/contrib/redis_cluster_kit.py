"""A real Redis Cluster for tests: ``redis-server --cluster-enabled yes`` x (primaries x
(1 + replicas)) on 127.0.0.1 free ports, each node in a directory of its own, joined as
``redis-cli --cluster create`` joins them (in well under its 6 s here); every node stopped
by its pid (``redis_kit.RedisServer``).

:class:`RedisClusterKit` is a context manager. Its ``node_timeout_ms`` (500 by default)
is Redis's ``cluster-node-timeout``: how long a primary may be silent before its replicas
start a failover. :meth:`~RedisClusterKit.primary_of` and
:meth:`~RedisClusterKit.wait_promoted` read ``CLUSTER SLOTS`` from a live node, so a test
can kill the primary of a slot and time the engine's own failover (the moment a replica
owns the slot).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import redis

from tests.contrib.redis_kit import RedisServer, free_port

_SETTLE_S = 30  # the cluster forms within this, or the fixture fails
SLOTS = 16384


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
            "--repl-diskless-sync-delay",  # a replica's first sync at once (default: 5 s)
            "0",
        ]
        self._args = args
        self.nodes: list[RedisServer] = []
        self.bus_ports: list[int] = []  # the nodes' cluster bus ports, in order
        for i in range(primaries * (1 + replicas)):
            node, bus = self._new_node(directory / f"node{i}")
            self.nodes.append(node)
            self.bus_ports.append(bus)

    def _new_node(self, node_dir: Path) -> tuple[RedisServer, int]:
        """A node in ``node_dir`` (made) on free ports, and its cluster bus port: a free
        port of its own (by default port + 10000, which may be taken)."""
        node_dir.mkdir()
        bus = free_port()
        return RedisServer(node_dir, extra_args=[*self._args, "--cluster-port", str(bus)]), bus

    def _start_node(self, i: int) -> None:
        """Start node ``i``; where one of its ports was taken between ``free_port()`` and
        the start (another test's connection, another xdist worker's server), the node
        starts again on new ports, in a new folder, up to 5 times."""
        for attempt in range(1, 6):
            try:
                self.nodes[i].start()
                return
            except RuntimeError as error:
                if "Failed listening" not in str(error) or attempt == 5:
                    raise
            folder = self.nodes[i].directory
            self.nodes[i], self.bus_ports[i] = self._new_node(
                folder.with_name(f"{folder.name}-{attempt}")
            )

    @property
    def urls(self) -> list[str]:
        """Every node's URL (what a bridge takes as its startup nodes)."""
        return [f"redis://127.0.0.1:{node.port}" for node in self.nodes]

    def start(self) -> None:
        """Start the nodes and join them as ``redis-cli --cluster create`` would, without
        its one-second waits: distinct config epochs, the slots split evenly over the
        primaries, every node met, each replica attached to its primary."""
        for i in range(len(self.nodes)):
            self._start_node(i)
        primaries = self.nodes[: self.primaries]
        for i, node in enumerate(primaries):
            start, end = i * SLOTS // self.primaries, (i + 1) * SLOTS // self.primaries - 1
            node.command("CLUSTER", "SET-CONFIG-EPOCH", str(i + 1))
            node.command("CLUSTER", "ADDSLOTSRANGE", str(start), str(end))
        for node, bus in zip(self.nodes[1:], self.bus_ports[1:], strict=True):
            self.nodes[0].command("CLUSTER", "MEET", "127.0.0.1", str(node.port), str(bus))
        ids = [self._node_id(node) for node in primaries]
        self._wait_until(
            lambda node: b"cluster_known_nodes:%d" % len(self.nodes) in self._info(node)
        )
        for i, replica in enumerate(self.nodes[self.primaries :]):
            replica.command("CLUSTER", "REPLICATE", ids[i % self.primaries])
        self._wait_until(self._ready)

    def _node_id(self, node: RedisServer) -> str:
        with self.client(node) as client:
            return str(client.execute_command("CLUSTER", "MYID").decode())

    def _info(self, node: RedisServer) -> bytes:
        with self.client(node) as client:
            info: bytes = client.execute_command("CLUSTER", "INFO")
            return info

    def _wait_until(self, ready: Callable[[RedisServer], bool]) -> None:
        """Poll until ``ready`` holds for every node."""
        deadline = time.monotonic() + _SETTLE_S
        while not all(ready(node) for node in self.nodes):
            if time.monotonic() > deadline:
                raise TimeoutError("the Redis Cluster did not form")
            time.sleep(0.02)

    def _ready(self, node: RedisServer) -> bool:
        if b"cluster_state:ok" not in self._info(node):
            return False
        with self.client(node) as client:
            replication = client.info("replication")
            return bool(
                replication["role"] == "master" or replication["master_link_status"] == "up"
            )

    def client(self, node: RedisServer) -> redis.Redis:
        return redis.Redis(port=node.port, socket_timeout=5, decode_responses=False)

    def live(self) -> list[RedisServer]:
        """The nodes that can answer: running, not paused (a paused one would hold each
        query for redis-py's timeouts and retries)."""
        return [node for node in self.nodes if node.proc is not None and not node.paused]

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
