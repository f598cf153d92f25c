"""A TCP server that closes connections idle for longer than a timeout.

Usage: python examples/idle_server.py [--host 127.0.0.1] [--port 8888]
       [--timeout-ms 30000] [--tick-ms 10] [--report-s 5] [--run-for-s S] [--uvloop]

Every received chunk touches its connection in an :class:`~purgatory.IdleTracker`
(one dictionary lookup and one clock read, no timer operation); a connection
silent for ``--timeout-ms`` gets the line ``idle timeout, goodbye`` and is
closed, within a timer tick of its deadline. Received bytes are discarded. The
server prints how many connections it holds and has reaped every
``--report-s`` seconds, and shuts down cleanly on SIGINT or SIGTERM (or after
``--run-for-s``): it stops listening, sends every connection a
``server shutting down`` line and half-closes it, closes each once its client has
left (aborting any still there after a grace period: closing outright would
reset a connection whose last bytes were not read, and lose the line), and stops
the timer's reaper.

:class:`IdleServer` is the whole server logic, importable and usable on port 0::

    async with IdleServer(timeout_ms=30_000) as server:
        print(server.port, server.connections, server.reaped)

Try it with ``nc 127.0.0.1 8888``: type a line now and then, then stop typing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import math
import os
import signal
import socket
import sys
from collections.abc import Callable
from typing import cast

from _cli import PORT, Parser, integer

from purgatory import IdleTracker, SystemTimer

GOODBYE = b"idle timeout, goodbye\n"
SHUTDOWN = b"server shutting down, goodbye\n"
DEFAULT_TICK_MS = 10  # idle timeouts are seconds long: a 10 ms tick wakes the reaper less
DEFAULT_BACKLOG = 4096  # bursts of thousands of connects; the kernel caps it at somaxconn
DEFAULT_GRACE_S = 2.0  # how long a shutdown waits for connections to drain before aborting


def _ignore(conn: _Connection) -> None:
    """The touch of a connection being closed: it is no longer tracked."""


class _Connection(asyncio.Protocol):
    """One client connection: every chunk received touches it; EOF closes it."""

    __slots__ = ("_server", "_touch", "transport")

    def __init__(self, server: IdleServer) -> None:
        self._server = server
        self._touch: Callable[[_Connection], None] = (
            server._touch
        )  # the tracker's bound touch, shared by all connections
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is no subclass
        self._server._connection_made(self)

    def data_received(self, data: bytes) -> None:
        self._touch(self)

    def eof_received(self) -> bool:
        return False  # the client is done: close our side too

    def say_goodbye(self, line: bytes) -> None:
        """Send ``line`` and half-close; close when the client has read it and left.

        Closing at once would drop the client's unread bytes, and a socket closed
        with unread bytes is reset by the kernel, which can destroy the goodbye
        before the client reads it. Half-closed, the connection keeps reading
        (and discarding) until the client's EOF, or the server's grace period.
        """
        transport = self.transport
        assert transport is not None
        self._touch = _ignore  # no more idle tracking: it is going
        transport.write(line)
        if transport.can_write_eof():
            transport.write_eof()
        else:
            transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._server._connection_lost(self)


class IdleServer:
    """A TCP server on ``host:port`` (port 0: any free port) that reaps idle connections.

    ``timer``: a :class:`~purgatory.SystemTimer` whose reaper the caller runs; by
    default the server makes one (tick ``tick_ms``) and runs its reaper between
    :meth:`start` and :meth:`close`. Counters: ``connections`` held now,
    ``accepted`` and ``reaped`` (closed for idleness) since start, ``shut_down``
    (closed by :meth:`close`).
    """

    def __init__(
        self,
        timeout_ms: int,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        timer: SystemTimer | None = None,
        tick_ms: int = DEFAULT_TICK_MS,
        backlog: int = DEFAULT_BACKLOG,
    ) -> None:
        if type(port) is not int or not 0 <= port <= 65535:
            raise ValueError(f"port must be an int in 0..65535, not {port!r}")
        self._owns_timer = timer is None
        self._timer = SystemTimer("idle", tick_ms=tick_ms) if timer is None else timer
        self._tracker: IdleTracker[_Connection] = IdleTracker(
            timeout_ms, self._on_idle, timer=self._timer
        )
        self._touch = self._tracker.touch
        self._host = host
        self._port = port
        self._backlog = backlog
        self._server: asyncio.Server | None = None
        # invariant: the connections whose connection_made ran and connection_lost has not
        self._connections: set[_Connection] = set()
        self._all_closed: asyncio.Event | None = None  # set when _connections empties
        self._closing = False  # close() began: late arrivals are turned away
        self.accepted = 0
        self.reaped = 0
        self.shut_down = 0

    @property
    def tracker(self) -> IdleTracker[_Connection]:
        return self._tracker

    @property
    def timer(self) -> SystemTimer:
        """The timer the tracker runs on (the server's own unless one was given)."""
        return self._timer

    @property
    def timeout_ms(self) -> int:
        return self._tracker.timeout_ms

    @property
    def connections(self) -> int:
        """Connections held now. O(1)."""
        return len(self._connections)

    @property
    def port(self) -> int:
        """The port listened on (the real one once started with port 0)."""
        return self._port

    @property
    def host(self) -> str:
        return self._host

    async def start(self) -> None:
        """Start the timer's reaper (if the server owns the timer) and listen."""
        if self._server is not None:
            raise RuntimeError("the server is already started")
        loop = asyncio.get_running_loop()
        if self._owns_timer:
            await self._timer.__aenter__()
        try:
            self._server = await loop.create_server(
                lambda: _Connection(self), self._host, self._port, backlog=self._backlog
            )
            self._port = int(self._server.sockets[0].getsockname()[1])
        except BaseException:
            if self._owns_timer:
                await self._timer.__aexit__(None, None, None)
            raise

    async def close(self, *, grace_s: float = DEFAULT_GRACE_S) -> None:
        """Stop listening, say goodbye to and close every connection, stop the reaper.

        Connections that do not drain within ``grace_s`` are aborted. O(connections).
        """
        server = self._server
        if server is None:
            return
        self._closing = True
        server.close()
        self._tracker.clear()
        try:
            if self._connections:
                self._all_closed = asyncio.Event()
                for conn in list(self._connections):
                    self.shut_down += 1
                    conn.say_goodbye(SHUTDOWN)
                try:
                    await asyncio.wait_for(self._all_closed.wait(), grace_s)
                except TimeoutError:
                    for conn in list(self._connections):
                        if conn.transport is not None:
                            conn.transport.abort()
                    await self._all_closed.wait()
            await server.wait_closed()
        finally:
            self._all_closed = None
            if self._owns_timer:
                await self._timer.__aexit__(None, None, None)

    def stats(self) -> str:
        return (
            f"connections {self.connections}  accepted {self.accepted}  "
            f"reaped {self.reaped}  shut down {self.shut_down}"
        )

    async def __aenter__(self) -> IdleServer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        state = "listening" if self._server is not None else "stopped"
        return f"<IdleServer {self._host}:{self.port} {state} {self.stats()}>"

    # -- protocol callbacks ---------------------------------------------------

    def _connection_made(self, conn: _Connection) -> None:
        self._connections.add(conn)
        self.accepted += 1
        if self._closing:  # accepted just before close(): turn it away
            assert conn.transport is not None
            self.shut_down += 1
            conn.say_goodbye(SHUTDOWN)
            return
        self._touch(conn)

    def _connection_lost(self, conn: _Connection) -> None:
        self._tracker.forget(conn)
        self._connections.discard(conn)
        if not self._connections and self._all_closed is not None:
            self._all_closed.set()

    def _on_idle(self, conn: _Connection) -> None:
        transport = conn.transport
        if transport is None or transport.is_closing():
            return
        self.reaped += 1
        transport.write(GOODBYE)
        transport.close()  # flushes the goodbye, then closes


class CannotListenError(Exception):
    """The server could not listen: the address is in use, the host does not
    resolve or is not this machine's. The message says which, in one line."""


def _why_not_listening(host: str, port: int, exc: OSError) -> str:
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve --host {host!r}: {exc.strerror}"
    reason = os.strerror(exc.errno) if exc.errno else str(exc)
    hint = ""
    if exc.errno == errno.EADDRINUSE:
        hint = "; pick another --port (0: any free port)"
    elif exc.errno == errno.EADDRNOTAVAIL:
        hint = "; --host must be an address of this machine"
    return f"cannot listen on {host}:{port}: {reason}{hint}"


async def serve(
    server: IdleServer,
    *,
    report_s: float = 5.0,
    run_for_s: float | None = None,
) -> IdleServer:
    """Run ``server`` until SIGINT/SIGTERM or ``run_for_s``, printing statistics.

    Raises :class:`CannotListenError` if it cannot start listening.
    """
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    deadline = None if run_for_s is None else loop.time() + run_for_s
    try:
        try:
            await server.start()
        except OSError as exc:
            raise CannotListenError(_why_not_listening(server.host, server.port, exc)) from exc
        try:
            print(
                f"listening on {server.host}:{server.port}, idle timeout {server.timeout_ms} ms",
                flush=True,
            )
            while not stop.is_set():
                wait_s = report_s if deadline is None else min(report_s, deadline - loop.time())
                if wait_s <= 0:
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), wait_s)
                print(server.stats(), flush=True)
            print("shutting down", flush=True)
        finally:
            await server.close()
        print(f"closed; {server.stats()}", flush=True)
        return server
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)


def _check_ranges(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse (a usage error, status 2) a value its type lets through."""
    for option, value, zero in (
        ("--report-s", args.report_s, False),
        ("--run-for-s", args.run_for_s, True),
    ):
        if value is not None and (
            not math.isfinite(value) or value < 0 or (value == 0 and not zero)
        ):
            wanted = "a number >= 0" if zero else "a number > 0"
            parser.error(f"argument {option}: must be {wanted} (seconds), not {value}")


def main(argv: list[str] | None = None) -> int:
    parser = Parser(
        description=__doc__.splitlines()[0],
        epilog="Exit status: 0 after a clean shutdown, 1 if it cannot listen (port in use, "
        "host not found), 2 for a refused option.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address or host name to listen on")
    parser.add_argument("--port", type=PORT, default=8888, help="TCP port; 0 picks any free port")
    parser.add_argument(
        "--timeout-ms",
        type=integer(1),
        default=30_000,
        help="close connections silent this long",
    )
    parser.add_argument(
        "--tick-ms",
        type=integer(1),
        default=DEFAULT_TICK_MS,
        help="the timer's tick: a connection is closed within a tick after its timeout",
    )
    parser.add_argument(
        "--report-s",
        type=float,
        default=5.0,
        help="print statistics this often",
    )
    parser.add_argument(
        "--run-for-s",
        type=float,
        default=None,
        help="stop after this long; without it, run until SIGINT or SIGTERM",
    )
    parser.add_argument("--uvloop", action="store_true", help="run on uvloop instead of asyncio")
    args = parser.parse_args(argv)
    _check_ranges(parser, args)
    try:
        server = IdleServer(args.timeout_ms, host=args.host, port=args.port, tick_ms=args.tick_ms)
    except ValueError as exc:  # the library's own limits: a tick of at most 2**40 ms
        parser.error(str(exc))
    coro = serve(server, report_s=args.report_s, run_for_s=args.run_for_s)
    try:
        if args.uvloop:
            try:
                import uvloop
            except ImportError:
                coro.close()
                parser.fail(1, "--uvloop needs uvloop: pip install 'aio-purgatory[uvloop]'")
            print("event loop: uvloop", flush=True)
            uvloop.run(coro)
        else:
            print("event loop: asyncio", flush=True)
            asyncio.run(coro)
    except CannotListenError as exc:
        parser.fail(1, str(exc))  # a failure at run time
    except KeyboardInterrupt:  # before the signal handlers were set, or after
        sys.exit(130)  # no traceback, the shell's status for SIGINT
    return 0


if __name__ == "__main__":
    sys.exit(main())
