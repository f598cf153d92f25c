"""A real Redis Sentinel deployment for tests: a primary, a replica and three sentinels,
each a process on 127.0.0.1 at a free port in a directory of its own, stopped by pid.

:class:`SentinelDeployment` (``with SentinelDeployment(tmp_path) as deployment``) starts
the primary, then the replica (``--replicaof`` the primary; in sync before the sentinels
start), then the sentinels (quorum 2, ``down-after-milliseconds`` and
``failover-timeout`` short so that a failover takes a second or two), and waits until
every sentinel knows the replica and the two other sentinels (they find each other
through the primary's ``__sentinel__:hello`` channel, every 2 s): only then can they
agree that the primary is down and elect the one that promotes the replica. Leaving
SIGKILLs every process it started. Each process is a :class:`~.redis_kit.RedisServer`
(a sentinel: ``redis-sentinel`` with a configuration file it may rewrite). Without
``redis-sentinel`` on PATH the test fails with one line naming the install script.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import redis

from tests.contrib.redis_kit import RedisServer, redis_server_path

SERVICE = "mymaster"


class SentinelServer(RedisServer):
    """One ``redis-sentinel`` watching :data:`SERVICE` at ``primary_port``."""

    def __init__(
        self, directory: Path, primary_port: int, down_after_ms: int, failover_timeout_ms: int
    ) -> None:
        super().__init__(directory)
        self.program = redis_server_path("redis-sentinel")
        self.url = f"redis://127.0.0.1:{self.port}"
        # written once: the sentinel rewrites it with what it learns
        (directory / "sentinel.conf").write_text(
            f"port {self.port}\n"
            "bind 127.0.0.1\n"
            f"dir {directory}\n"
            f"sentinel monitor {SERVICE} 127.0.0.1 {primary_port} 2\n"
            f"sentinel down-after-milliseconds {SERVICE} {down_after_ms}\n"
            f"sentinel failover-timeout {SERVICE} {failover_timeout_ms}\n"
            f"sentinel parallel-syncs {SERVICE} 1\n"
        )

    def argv(self) -> list[str]:
        return [self.program, str(self.directory / "sentinel.conf")]


def _client(port: int) -> redis.Redis:
    return redis.Redis(port=port, socket_timeout=5, socket_connect_timeout=5)


class SentinelDeployment:
    """A primary, a replica and three sentinels; see the module doc."""

    def __init__(
        self, directory: Path, *, down_after_ms: int = 300, failover_timeout_ms: int = 2000
    ) -> None:
        def subdir(name: str) -> Path:
            path = directory / name
            path.mkdir()
            return path

        # no 5 s wait before a diskless full sync (Redis 7's default), on both: either
        # may be the primary that syncs the other
        fast_sync = ["--repl-diskless-sync-delay", "0"]
        self.primary = RedisServer(subdir("primary"), extra_args=fast_sync)
        self.replica = RedisServer(
            subdir("replica"),
            extra_args=[*fast_sync, "--replicaof", "127.0.0.1", str(self.primary.port)],
        )
        self.sentinels = [
            SentinelServer(
                subdir(f"sentinel-{i}"), self.primary.port, down_after_ms, failover_timeout_ms
            )
            for i in range(3)
        ]
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        #: the bridge's URL for this deployment
        self.url = f"redis+sentinel://{hosts}/{SERVICE}"

    @property
    def servers(self) -> list[RedisServer]:
        return [self.primary, self.replica]

    def start(self, timeout_s: float = 30.0) -> None:
        """Start every process and wait until the sentinels can fail over."""
        deadline = time.monotonic() + timeout_s
        self.primary.start()
        self.replica.start()
        self._until(deadline, self._replica_in_sync, "the replica in sync")
        for sentinel in self.sentinels:
            sentinel.start()
        self._until(deadline, self._sentinels_ready, "the sentinels know each other")

    def primary_port(self) -> int:
        """The primary's port as the first sentinel that answers names it."""
        for sentinel in self.sentinels:
            if sentinel.proc is None:
                continue
            with _client(sentinel.port) as client:
                _host, port = client.sentinel_get_master_addr_by_name(SERVICE)
                return int(port)
        raise RuntimeError("no sentinel runs")

    def server_at(self, port: int) -> RedisServer:
        return next(server for server in self.servers if server.port == port)

    def _replica_in_sync(self) -> bool:
        with _client(self.replica.port) as client:
            info = client.info("replication")
        return bool(info.get("master_link_status") == "up")

    def _sentinels_ready(self) -> bool:
        for sentinel in self.sentinels:
            with _client(sentinel.port) as client:
                state = client.sentinel_master(SERVICE)
            if state["num-slaves"] < 1 or state["num-other-sentinels"] < 2:
                return False
        return True

    @staticmethod
    def _until(deadline: float, condition: Callable[[], bool], what: str) -> None:
        while not condition():
            if time.monotonic() > deadline:
                raise TimeoutError(f"Sentinel deployment: {what}: not in time")
            time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL every process this deployment started. Idempotent."""
        for server in [*self.sentinels, *self.servers]:
            server.kill()

    def __enter__(self) -> SentinelDeployment:
        try:
            self.start()
        except BaseException:
            self.kill()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.kill()
