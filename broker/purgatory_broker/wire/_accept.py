"""The accept loop: connections in, and a pause (not a flood of tracebacks) when the
process runs out of file descriptors.

asyncio's server handles ``EMFILE`` from ``accept(2)`` by reporting it to the
loop's exception handler (logged as an error with a traceback) and retrying a
second later, forever; a broker whose descriptors are gone logs a traceback a
second (uvloop, one per refused attempt) and learns nothing new from it. A
loop-wide exception-handler filter could hide those lines, but it would be
installed on a loop the broker may not own, and it could not tell when accepting
works again. So :class:`Acceptor` owns the listening socket and accepts with
``loop.sock_accept``::

    accept -> socket              hand it over (on_accept); the backoff resets;
                                  a shortage, if any, ends with one line
    accept -> EMFILE, ENFILE,     Shortage.fail: one warning when the shortage
              ENOBUFS, ENOMEM     starts, DEBUG after; sleep the backoff
              (or anything else)  (10 ms, doubling up to 1 s), accept again
    accept -> ECONNABORTED, ...   the peer gave up, or a pending network error
                                  (accept(2) says: retry): accept again

Connections already open are served all along: only the accept task sleeps.
While it does, new connections wait in the kernel's backlog and are accepted,
in order, once descriptors free up (a connection closing frees one).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
from collections.abc import Callable

from ._shortage import Shortage

__all__ = ["RETRY_MAX_S", "RETRY_MIN_S", "Acceptor", "listen"]

log = logging.getLogger(__name__)

#: The first pause after a refused accept, and the longest (the pause doubles).
RETRY_MIN_S = 0.01
RETRY_MAX_S = 1.0
BACKLOG = 100  # as asyncio's start_server
#: accept(2) on Linux: errors of the new connection itself, to be retried at once.
_PEER_ERRORS = frozenset(
    {
        errno.ECONNABORTED,
        errno.EPROTO,
        errno.ENETDOWN,
        errno.ENOPROTOOPT,
        errno.EHOSTDOWN,
        errno.EHOSTUNREACH,
        errno.EOPNOTSUPP,
        errno.ENETUNREACH,
        errno.EPERM,
    }
)


async def listen(host: str, port: int) -> socket.socket:
    """A non-blocking listening TCP socket on ``host:port`` (0: any free port); the
    first address ``host`` resolves to, with SO_REUSEADDR (as asyncio's server)."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, _, _, _, address = infos[0]
    sock = socket.create_server(address, family=family, backlog=BACKLOG)
    sock.setblocking(False)
    return sock


class Acceptor:
    """Accepts on ``sock`` until cancelled, calling ``on_accept(conn)`` for each new
    connection; see the module doc. ``open_connections()`` is quoted in the warning."""

    def __init__(
        self,
        sock: socket.socket,
        on_accept: Callable[[socket.socket], None],
        open_connections: Callable[[], int],
    ) -> None:
        self.sock = sock
        self._on_accept = on_accept
        self._open_connections = open_connections
        self.shortage = Shortage("accepting connections", log)
        self.accepted = 0

    async def run(self) -> None:
        """Accept forever (cancel to stop); never raises OSError. O(1) per connection."""
        loop = asyncio.get_running_loop()
        sock = self.sock
        shortage = self.shortage
        pause_s = RETRY_MIN_S
        while True:
            try:
                conn, _ = await loop.sock_accept(sock)
            except OSError as exc:
                if exc.errno in _PEER_ERRORS:
                    continue
                shortage.fail(
                    f"cannot accept connections: {exc.strerror} (errno {exc.errno}); "
                    f"serving the {self._open_connections()} open connections and "
                    f"retrying, at least every {RETRY_MAX_S:g} s"
                )
                await asyncio.sleep(pause_s)
                pause_s = min(pause_s * 2, RETRY_MAX_S)
                continue
            pause_s = RETRY_MIN_S
            shortage.clear()
            self.accepted += 1
            self._on_accept(conn)
