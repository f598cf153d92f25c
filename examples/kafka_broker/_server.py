"""The TCP server: frames in, replies out in request order, bad input closes one connection.

One connection, two tasks::

    reader:  read size (4 bytes) -> check limit -> read frame -> handler.handle(frame)
             -> reply (bytes | Pending | None) -> queue        (pauses when queue full)
    writer:  queue -> bytes, or await Pending (the DelayedProduce / DelayedFetch)
             -> write -> drain

The handler runs synchronously in the reader, so appends happen in request
order; the queue keeps replies in request order although a later request's reply
(a Metadata) may be ready before an earlier one's (an acks=all produce). acks=0
produces put nothing in the queue. ``max_pending_responses`` bounds the queue,
so a client pipelining without reading cannot grow memory without bound.

Bad input (see :class:`~._handlers.CloseConnection`): a size below 8 or above
``max_frame_bytes``, a truncated frame (EOF inside it), an unknown API key or
version, a request that does not decode, an internal error: that connection is
closed, logged and counted in :class:`WireStats`; the others are untouched.
Anything acknowledged is already in the partition log. A bad CRC or a malformed
batch is not a connection error: the partition answers CORRUPT_MESSAGE or
INVALID_RECORD.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from purgatory.broker import Broker, CorruptRecordError

from ._config import WireConfig
from ._handlers import TOPIC_NAME, CloseConnection, Pending, Reply, RequestHandler
from ._replicas import FollowerReplicas, HighWatermarkHook

__all__ = ["KafkaWireBroker", "WireStats", "existing_topics"]

log = logging.getLogger(__name__)

_SIZE_BYTES = 4
_MIN_FRAME_BYTES = 8  # api key, api version, correlation id


def existing_topics(data_dir: Path) -> list[str]:
    """The topics with a partition directory (``<topic>-<n>``) in ``data_dir``. O(entries)."""
    if not data_dir.is_dir():
        return []
    names = set()
    for path in data_dir.iterdir():
        topic, dash, index = path.name.rpartition("-")
        if dash and index.isdigit() and TOPIC_NAME.fullmatch(topic) and path.is_dir():
            names.add(topic)
    return sorted(names)


@dataclass(slots=True)
class WireStats:
    """Connection counters; ``internal_errors`` must stay 0 (a handler bug otherwise)."""

    connections_opened: int = 0
    connections_closed: int = 0
    closed_for_bad_input: int = 0
    internal_errors: int = 0
    requests: int = 0


class KafkaWireBroker:
    """A one-broker Kafka cluster on 127.0.0.1 backed by :class:`purgatory.broker.Broker`.

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
        self._replicas: FollowerReplicas | None = None
        self._handler: RequestHandler | None = None
        self._server: asyncio.Server | None = None
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
    def replicas(self) -> FollowerReplicas:
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
        """Open the broker and listen. Raises OSError if the port is taken."""
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
        self._replicas = FollowerReplicas(
            broker,
            range(1, cfg.followers + 1),
            lag_ms=cfg.follower_lag_ms,
            max_wait_ms=cfg.follower_max_wait_ms,
            replica_lag_time_max_ms=cfg.replica_lag_time_max_ms,
            on_high_watermark=self._on_high_watermark,
        )
        self._handler = RequestHandler(broker, self._replicas, cfg, lambda: (cfg.host, self._port))
        self._open_existing_topics(Path(data_dir))
        try:
            self._server = await asyncio.start_server(self._serve_connection, cfg.host, cfg.port)
        except OSError:
            await self.close()
            raise
        self._port = self._server.sockets[0].getsockname()[1]
        log.info("listening on %s", self.bootstrap_servers)

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
        if self._server is None:
            await self.start()
        await self._closed.wait()

    async def close(self) -> None:
        """Stop listening, drop every connection, stop the followers, close the broker.
        Idempotent."""
        if self._closing:
            await self._closed.wait()
            return
        self._closing = True
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
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

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- connections -------------------------------------------------------------

    async def _serve_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        if self._closing:
            writer.close()
            return
        self._connections.add(task)
        self.stats.connections_opened += 1
        try:
            await self._serve(reader, writer)
        except asyncio.CancelledError:
            # close() cancels connections (maybe while one is already cleaning up).
            # End normally: Python 3.11's start_server callback calls
            # task.exception() on the finished task, which raises, and logs an
            # error, if the task ended cancelled.
            if not self._closing:
                raise
        finally:
            writer.close()
            self.stats.connections_closed += 1
            self._connections.discard(task)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        queue: asyncio.Queue[Reply] = asyncio.Queue(self.config.max_pending_responses)
        write_task = asyncio.get_running_loop().create_task(self._write_replies(queue, writer))
        write_task.add_done_callback(lambda _: writer.close())
        try:
            await self._read_requests(reader, queue)
        except CloseConnection as exc:
            self.stats.closed_for_bad_input += 1
            log.info("closing connection from %s: %s", peer, exc)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the client went away (EOF, possibly inside a frame)
        finally:
            write_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await write_task  # it catches its own errors
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()

    async def _read_requests(
        self, reader: asyncio.StreamReader, queue: asyncio.Queue[Reply]
    ) -> None:
        max_frame = self.config.max_frame_bytes
        handler = self.handler
        stats = self.stats
        while True:
            try:
                head = await reader.readexactly(_SIZE_BYTES)
            except asyncio.IncompleteReadError as exc:
                if exc.partial:
                    raise CloseConnection("truncated frame size") from None
                return  # a clean EOF between frames
            size = int.from_bytes(head, "big", signed=True)
            if not _MIN_FRAME_BYTES <= size <= max_frame:
                raise CloseConnection(
                    f"frame size {size} outside [{_MIN_FRAME_BYTES}, {max_frame}]"
                )
            try:
                frame = await reader.readexactly(size)
            except asyncio.IncompleteReadError as exc:
                raise CloseConnection(
                    f"truncated frame: {len(exc.partial)} of {size} bytes before EOF"
                ) from None
            stats.requests += 1
            try:
                reply = handler.handle(frame)
            except CloseConnection:
                raise
            except Exception as exc:
                stats.internal_errors += 1
                log.exception("internal error handling a request")
                raise CloseConnection(f"internal error: {exc!r}") from exc
            if reply is not None:
                await queue.put(reply)

    async def _write_replies(
        self, queue: asyncio.Queue[Reply], writer: asyncio.StreamWriter
    ) -> None:
        while True:
            reply = await queue.get()
            if isinstance(reply, Pending):
                try:
                    data = await reply.wait()
                except Exception:
                    self.stats.internal_errors += 1
                    log.exception("a delayed reply failed")
                    return
            else:
                assert reply is not None
                data = reply
            try:
                writer.write(data)
                if queue.empty():
                    await writer.drain()
            except ConnectionError:
                return  # the reader sees the closed connection too
