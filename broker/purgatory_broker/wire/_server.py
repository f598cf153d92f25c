"""The TCP server: the broker, its listening socket, its connections, its timer.

:class:`KafkaWireBroker` opens a :class:`purgatory_broker.broker.Broker` (partitions,
produce and fetch purgatories), the simulated followers and the request handler,
then listens. Connections come from :class:`~._accept.Acceptor`, which owns the
listening socket and, out of file descriptors, keeps serving the connections
open while it pauses and retries (logged once). Each connection is a
:class:`~._connection.Connection` task: frames in, replies out in request order,
bad input closes only that connection (see :mod:`._connection`).

The wire broker runs one more :class:`~purgatory.SystemTimer` (tick
:data:`WIRE_TICK_MS`, on the broker's clock) beside the purgatories' for its own
deadlines, which are seconds to days long: the idle and frame-wait trackers of
:class:`~._connection.ConnectionLimits` and the expiry of idempotent producer
state (:mod:`._idempotence`). It has its own timer so that they do not count as
delayed operations in the purgatories' statistics.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import tempfile
from pathlib import Path
from typing import Any

from purgatory import SystemTimer
from purgatory_broker.broker import (
    Broker,
    CorruptRecordError,
    Followers,
    GroupCoordinator,
    HighWatermarkHook,
)

from ._accept import Acceptor, listen
from ._config import WireConfig
from ._connection import Connection, ConnectionLimits, WireStats
from ._handlers import TOPIC_NAME, RequestHandler

__all__ = ["WIRE_TICK_MS", "KafkaWireBroker", "WireStats", "existing_topics"]

log = logging.getLogger(__name__)

#: The wire timer's tick: its deadlines are seconds long, so 10 ms wakes it seldom.
WIRE_TICK_MS = 10


def existing_topics(data_dir: Path) -> list[str]:
    """The topics with a partition directory (``<topic>-<n>``) in ``data_dir``. O(entries).
    (The coordinator's ``__consumer_offsets`` directory has no ``-<n>``, so is no topic.)"""
    if not data_dir.is_dir():
        return []
    names = set()
    for path in data_dir.iterdir():
        topic, dash, index = path.name.rpartition("-")
        if dash and index.isdigit() and TOPIC_NAME.fullmatch(topic) and path.is_dir():
            names.add(topic)
    return sorted(names)


class KafkaWireBroker:
    """A one-broker Kafka cluster on 127.0.0.1 backed by :class:`purgatory_broker.broker.Broker`.

    ``async with KafkaWireBroker(WireConfig(port=0)) as wb:`` starts it;
    ``wb.bootstrap_servers`` is what clients connect to.
    """

    def __init__(
        self,
        config: WireConfig | None = None,
        *,
        on_high_watermark: HighWatermarkHook | None = None,
    ) -> None:
        self.config = WireConfig() if config is None else config
        self.config.validate()
        self.stats = WireStats()
        self._on_high_watermark = on_high_watermark
        self._broker: Broker | None = None
        self._replicas: Followers | None = None
        self._handler: RequestHandler | None = None
        self._timer: SystemTimer | None = None
        self._coordinator: GroupCoordinator | None = None
        self._limits: ConnectionLimits | None = None
        self._listener: socket.socket | None = None
        self._acceptor: Acceptor | None = None
        self._accept_task: asyncio.Task[None] | None = None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._port = 0
        self._connections: set[asyncio.Task[Any]] = set()
        self._closed = asyncio.Event()
        self._closing = False

    # -- state -----------------------------------------------------------------

    @property
    def broker(self) -> Broker:
        if self._broker is None:
            raise RuntimeError("the wire broker is not started")
        return self._broker

    @property
    def handler(self) -> RequestHandler:
        if self._handler is None:
            raise RuntimeError("the wire broker is not started")
        return self._handler

    @property
    def timer(self) -> SystemTimer:
        """The wire broker's own timer (idle connections, frame waits, producer expiry)."""
        if self._timer is None:
            raise RuntimeError("the wire broker is not started")
        return self._timer

    @property
    def coordinator(self) -> GroupCoordinator:
        """The group coordinator (consumer groups, committed offsets)."""
        if self._coordinator is None:
            raise RuntimeError("the wire broker is not started")
        return self._coordinator

    @property
    def replicas(self) -> Followers:
        if self._replicas is None:
            raise RuntimeError("the wire broker is not started")
        return self._replicas

    @property
    def port(self) -> int:
        """The port listened on (the real one when configured with 0)."""
        return self._port

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.config.host}:{self._port}"

    def pause_replication(self) -> None:
        """Followers stop fetching: acks=all produces wait (until their timeout)."""
        self.replicas.pause()

    def resume_replication(self) -> None:
        self.replicas.resume()

    def __repr__(self) -> str:
        return f"<KafkaWireBroker {self.bootstrap_servers} {self.stats}>"

    # -- lifecycle ---------------------------------------------------------------

    async def start(self) -> None:
        """Listen, then open the broker. Raises OSError if the port is taken or the host
        does not resolve (before anything is opened), or if the data directory cannot
        be used."""
        cfg = self.config
        # bind first: a port in use or a bad host fails before anything is created
        self._listener = await listen(cfg.host, cfg.port)
        self._port = self._listener.getsockname()[1]
        try:
            await self._open()
        except BaseException:
            await self.close()
            raise
        assert self._listener is not None
        self._acceptor = Acceptor(self._listener, self._accepted, lambda: len(self._connections))
        self._accept_task = asyncio.get_running_loop().create_task(
            self._acceptor.run(), name=f"accept-{self._port}"
        )
        log.info("listening on %s", self.bootstrap_servers)

    async def _open(self) -> None:
        """Open the broker, its timer, the coordinator, the followers, the handler."""
        cfg = self.config
        data_dir = cfg.data_dir
        if data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="kafka-wire-")
            data_dir = self._tmp.name
        broker = Broker(
            data_dir,
            tick_ms=cfg.tick_ms,
            wheel_size=cfg.wheel_size,
            flush_messages=cfg.flush_messages,
            flush_ms=cfg.flush_ms,
        )
        await broker.__aenter__()
        self._broker = broker
        # Kafka's filing, as the broker's purgatories (broker.py)
        timer = SystemTimer("wire", tick_ms=WIRE_TICK_MS, clock=broker.clock, may_expire_early=True)
        await timer.__aenter__()
        self._timer = timer
        coordinator = GroupCoordinator(data_dir, cfg.group_config(), clock=broker.clock)
        await coordinator.__aenter__()
        self._coordinator = coordinator
        self._limits = ConnectionLimits(cfg, timer, self.stats)
        self._replicas = Followers(
            broker,
            range(1, cfg.followers + 1),
            lag_ms=cfg.follower_lag_ms,
            max_wait_ms=cfg.follower_max_wait_ms,
            replica_lag_time_max_ms=cfg.replica_lag_time_max_ms,
            on_high_watermark=self._on_high_watermark,
        )
        self._handler = RequestHandler(
            broker,
            self._replicas,
            cfg,
            lambda: (cfg.host, self._port),
            timer=timer,
            coordinator=coordinator,
        )
        self._open_existing_topics(Path(data_dir))

    def _open_existing_topics(self, data_dir: Path) -> None:
        """Open the topics already in ``data_dir`` now, as Kafka loads its logs at start,
        so log recovery (and its warnings) happens before the first client. O(logs)."""
        for name in existing_topics(data_dir):
            try:
                self.handler.topic(name)
            except (OSError, CorruptRecordError):
                log.exception("cannot open topic %s from %s", name, data_dir)

    async def serve_forever(self) -> None:
        """Start (if needed) and serve until :meth:`close`."""
        if self._listener is None:
            await self.start()
        await self._closed.wait()

    async def close(self) -> None:
        """Stop listening, drop every connection, stop the followers, close the broker.
        Idempotent."""
        if self._closing:
            await self._closed.wait()
            return
        self._closing = True
        if self._accept_task is not None:
            self._accept_task.cancel()
            await asyncio.gather(self._accept_task, return_exceptions=True)
        if self._listener is not None:
            self._listener.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        if self._timer is not None:
            await self._timer.__aexit__(None, None, None)
        if self._coordinator is not None:
            await self._coordinator.close()
        if self._replicas is not None:
            await self._replicas.close()
        if self._broker is not None:
            await self._broker.close()
        if self._tmp is not None:
            self._tmp.cleanup()
        self._closed.set()

    async def __aenter__(self) -> KafkaWireBroker:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # -- connections -------------------------------------------------------------

    def _accepted(self, conn: socket.socket) -> None:
        """The acceptor's hand-over: one task per connection."""
        if self._closing:
            conn.close()
            return
        task = asyncio.get_running_loop().create_task(self._serve_connection(conn))
        self._connections.add(task)
        task.add_done_callback(self._connections.discard)

    async def _serve_connection(self, conn: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(loop=loop)
        protocol = asyncio.StreamReaderProtocol(reader, loop=loop)
        try:
            transport, _ = await loop.connect_accepted_socket(lambda: protocol, conn)
        except (OSError, asyncio.CancelledError):
            conn.close()
            return
        writer = asyncio.StreamWriter(transport, protocol, reader, loop)
        assert self._limits is not None
        self.stats.connections_opened += 1
        try:
            await Connection(reader, writer, self.handler, self._limits).serve()
        except asyncio.CancelledError:
            if not self._closing:  # close() cancels connections; anything else is real
                raise
        finally:
            writer.transport.abort()  # if serve() was cancelled before closing it
            self.stats.connections_closed += 1
