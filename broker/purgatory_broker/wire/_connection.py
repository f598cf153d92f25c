"""One client connection: frames in, replies out in request order, within limits.

Two tasks per connection::

    reader:  [room for replies?] -> first byte of the size -> rest of the size
             -> check limit -> frame -> handler.handle(frame)
             -> reply (bytes | Pending | None) -> queue
    writer:  queue -> bytes, or await Pending (the DelayedProduce / DelayedFetch)
             -> write -> drain

The handler runs synchronously in the reader, so appends happen in request
order; the queue keeps replies in request order although a later request's reply
(a Metadata) may be ready before an earlier one's (an acks=all produce). acks=0
produces put nothing in the queue.

Bad input (see :class:`~._handlers.CloseConnection`): a size below 8 or above
``max_frame_bytes``, a truncated frame (EOF inside it), an unknown API key or
version, a request that does not decode, an internal error: that connection is
closed, logged and counted in :class:`WireStats`; the others are untouched.
Anything acknowledged is already in the partition log. A bad CRC or a malformed
batch is not a connection error: the partition answers CORRUPT_MESSAGE or
INVALID_RECORD.

The limits (:class:`ConnectionLimits`, shared by every connection):

* idle (Kafka's ``connections.max.idle.ms``): an
  :class:`~purgatory.IdleTracker` on the wire broker's timer, touched when a
  request starts to arrive and when a reply is written. When it fires, a
  connection whose writer awaits a delayed reply (a long poll in the fetch
  purgatory, an acks=all produce) is busy, not idle: it is touched again; any
  other is closed. A client that stops reading while the broker waits to write
  to it is idle too (nothing moves), as in Kafka.
* frame wait (``max_frame_wait_ms``): a second tracker, touched at the first
  byte of every request. When it fires for a connection still inside that
  request, the request has taken too long to arrive (2 bytes of a size and
  silence, or half a body) and the connection is closed; otherwise nothing
  happens. A busy connection costs one dictionary lookup and one clock read per
  request, and one timer operation per limit period (the tracker's lazy re-arm).
* back-pressure: the reader stops reading while ``max_pending_responses``
  replies are queued, or while they reserve ``max_pending_response_bytes``.
  Each reply reserves the bytes it holds (a ready reply: its
  size; a delayed fetch: its request's ``max_bytes``, or the sum of its
  partitions' limits if smaller; a delayed produce: nothing) until it is written
  and drained. A reader that stops reading lets TCP push back on the client;
  the request that crosses the limit is admitted, so a connection holds at most
  the limit plus one reply (a batch larger than its partition's limit can go
  past its fetch's reservation). The writer drains after every write, so the
  transport buffers at most its high-water mark beyond that.

A connection the broker closes (idle, frame wait) is aborted: its reader sees
EOF, the reason is logged at INFO and counted; closing waits at most
:data:`CLOSE_LINGER_S` for the client to take the last bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass

from purgatory import IdleTracker, SystemTimer

from ._config import WireConfig
from ._handlers import CloseConnection, Pending, Reply, RequestHandler

__all__ = ["CLOSE_LINGER_S", "Connection", "ConnectionLimits", "WireStats"]

log = logging.getLogger(__name__)

_SIZE_BYTES = 4
_MIN_FRAME_BYTES = 8  # api key, api version, correlation id
#: How long closing a connection waits for the client to take what was written.
CLOSE_LINGER_S = 5.0


@dataclass(slots=True)
class WireStats:
    """Connection counters; ``internal_errors`` must stay 0 (a handler bug otherwise)."""

    connections_opened: int = 0
    connections_closed: int = 0
    closed_for_bad_input: int = 0
    internal_errors: int = 0
    requests: int = 0
    closed_idle: int = 0  # silent for connections_max_idle_ms
    closed_frame_timeout: int = 0  # a request not complete within max_frame_wait_ms
    reads_paused: int = 0  # times a connection stopped being read: replies not taken
    peak_pending_response_bytes: int = 0  # the most one connection had reserved


class ConnectionLimits:
    """The limits every connection shares: two trackers on the wire timer and the
    reply budget; see the module doc."""

    def __init__(self, config: WireConfig, timer: SystemTimer, stats: WireStats) -> None:
        self.config = config
        self.stats = stats
        self.idle: IdleTracker[Connection] = IdleTracker(
            config.connections_max_idle_ms, self._idle, timer=timer
        )
        self.frame: IdleTracker[Connection] = IdleTracker(
            config.max_frame_wait_ms, self._frame_overdue, timer=timer
        )

    def _idle(self, conn: Connection) -> None:
        if conn.awaiting_reply:
            self.idle.touch(conn)  # waiting in a purgatory is not idle: look again later
            return
        self.stats.closed_idle += 1
        conn.close_for(f"idle for {self.config.connections_max_idle_ms} ms")

    def _frame_overdue(self, conn: Connection) -> None:
        if not conn.mid_frame:
            return  # between requests: the idle limit's business
        self.stats.closed_frame_timeout += 1
        conn.close_for(f"a request took more than {self.config.max_frame_wait_ms} ms to arrive")

    def forget(self, conn: Connection) -> None:
        """``conn`` is gone: stop tracking it. O(1)."""
        self.idle.forget(conn)
        self.frame.forget(conn)


class Connection:
    """One client connection; :meth:`serve` runs it to the end. See the module doc."""

    __slots__ = (
        "_room",
        "_writer_gone",
        "awaiting_reply",
        "client_host",
        "close_reason",
        "handler",
        "limits",
        "mid_frame",
        "peer",
        "pending_bytes",
        "reader",
        "writer",
    )

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        handler: RequestHandler,
        limits: ConnectionLimits,
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.handler = handler
        self.limits = limits
        self.peer = writer.get_extra_info("peername")
        # Kafka's client host: "/" and the peer's address
        self.client_host = f"/{self.peer[0]}" if isinstance(self.peer, tuple) else ""
        self.mid_frame = False  # between a request's first byte and its last
        self.awaiting_reply = False  # the writer waits for a delayed operation
        # invariant: the bytes reserved by the replies queued or being written
        self.pending_bytes = 0
        # set while the replies queued (count and bytes) are under their limits,
        # or once the writer is gone
        self._room = asyncio.Event()
        self._room.set()
        self._writer_gone = False
        self.close_reason: str | None = None  # why the broker closed it, if it did

    def close_for(self, reason: str) -> None:
        """Close from the broker's side: abort the transport (the reader sees EOF and
        :meth:`serve` logs ``reason``). Idempotent. O(1)."""
        if self.close_reason is None:
            self.close_reason = reason
        self.writer.transport.abort()

    async def serve(self) -> None:
        """Read requests and write replies until either side closes; never raises
        for the client's doing."""
        limits = self.limits
        stats = limits.stats
        queue: asyncio.Queue[tuple[Reply, int]] = asyncio.Queue()  # bounded through _room
        writer = self.writer
        write_task = asyncio.get_running_loop().create_task(self._write_replies(queue))
        write_task.add_done_callback(self._writer_ended)
        limits.idle.touch(self)
        try:
            await self._read_requests(queue)
        except CloseConnection as exc:
            if self.close_reason is None:
                stats.closed_for_bad_input += 1
                log.info("closing connection from %s: %s", self.peer, exc)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the client went away (EOF, possibly inside a frame), or we closed it
        finally:
            limits.forget(self)
            if self.close_reason is not None:
                log.info("closing connection from %s: %s", self.peer, self.close_reason)
            write_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await write_task  # it catches its own errors
            writer.close()
            try:
                await asyncio.wait_for(writer.wait_closed(), CLOSE_LINGER_S)
            except TimeoutError:
                writer.transport.abort()  # the client does not take our last bytes
            except (ConnectionError, OSError):
                pass

    def _writer_ended(self, _: object) -> None:
        self._writer_gone = True
        self._room.set()  # a reader waiting for room must not wait for ever
        self.writer.close()

    async def _read_requests(self, queue: asyncio.Queue[tuple[Reply, int]]) -> None:
        limits = self.limits
        config = limits.config
        max_frame = config.max_frame_bytes
        budget = config.max_pending_response_bytes
        max_replies = config.max_pending_responses
        touch_idle = limits.idle.touch
        touch_frame = limits.frame.touch
        stats = limits.stats
        reader = self.reader
        room = self._room
        while True:
            if self.pending_bytes >= budget or queue.qsize() >= max_replies:
                stats.reads_paused += 1
                room.clear()
                await room.wait()
                if self._writer_gone:
                    return
            try:
                first = await reader.readexactly(1)
            except asyncio.IncompleteReadError:
                return  # a clean EOF between frames
            touch_idle(self)
            touch_frame(self)
            self.mid_frame = True
            try:
                head = first + await reader.readexactly(_SIZE_BYTES - 1)
            except asyncio.IncompleteReadError:
                raise CloseConnection("truncated frame size") from None
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
            self.mid_frame = False
            self._handle(frame, queue)
            del frame  # a large request is not kept while the next one arrives

    def _handle(self, frame: bytes, queue: asyncio.Queue[tuple[Reply, int]]) -> None:
        """Answer one request and queue its reply with its reservation (the reply is
        not kept in a local of the read loop while it waits for room)."""
        stats = self.limits.stats
        stats.requests += 1
        try:
            reply = self.handler.handle(frame, self.client_host)
        except CloseConnection:
            raise
        except Exception as exc:
            stats.internal_errors += 1
            log.exception("internal error handling a request")
            raise CloseConnection(f"internal error: {exc!r}") from exc
        if reply is None:
            return
        reserved = len(reply) if isinstance(reply, bytes) else reply.size_hint_bytes
        self.pending_bytes += reserved
        if self.pending_bytes > stats.peak_pending_response_bytes:
            stats.peak_pending_response_bytes = self.pending_bytes
        queue.put_nowait((reply, reserved))

    async def _write_replies(self, queue: asyncio.Queue[tuple[Reply, int]]) -> None:
        writer = self.writer
        limits = self.limits
        budget = limits.config.max_pending_response_bytes
        max_replies = limits.config.max_pending_responses
        touch_idle = limits.idle.touch
        stats = limits.stats
        room = self._room
        while True:
            reply, reserved = await queue.get()
            if isinstance(reply, Pending):
                self.awaiting_reply = True
                try:
                    data = await reply.wait()
                except Exception:
                    stats.internal_errors += 1
                    log.exception("a delayed reply failed")
                    return
                finally:
                    self.awaiting_reply = False
            else:
                assert reply is not None
                data = reply
            try:
                writer.write(data)
                del data, reply  # the transport holds what it has not sent yet
                await writer.drain()
            except ConnectionError:
                return  # the reader sees the closed connection too
            touch_idle(self)
            self.pending_bytes -= reserved
            if self.pending_bytes < budget and queue.qsize() < max_replies:
                room.set()
