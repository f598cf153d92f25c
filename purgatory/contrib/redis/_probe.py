"""A probe: does a Redis answer at an address, now? One connect and one inline ``PING``.

During a long wait between reconnect attempts a side probes every ``probe_ms`` (see
:mod:`._reconnect`), so it must cost next to nothing while Redis is down: a TCP connect
to a closed port on the same host is refused by the kernel in microseconds (measured in
``benchmarks/redis_reconnect_bench.py``), a connect to a host that does not answer is
cut at the probe's timeout. When the connect succeeds the probe sends ``PING`` inline
and waits for the first byte of any reply (``+PONG``, or an error such as ``-NOAUTH``:
a Redis that replies serves commands); a paused Redis (``SIGSTOP``: the kernel still
accepts connections into its backlog) replies nothing and the probe fails at its
timeout. Over TLS (``rediss://``) the probe is the TCP connect alone: a ``PING`` would
need the handshake, which costs what an attempt costs.
"""

from __future__ import annotations

import asyncio

from redis.asyncio.connection import SSLConnection, parse_url

__all__ = ["Address", "address_of", "answers"]

#: Where a Redis listens: (host, port), or a Unix socket's path
Address = tuple[str, int] | str


def address_of(redis_url: str) -> tuple[Address, bool]:
    """The address a ``redis://``, ``rediss://`` or ``unix://`` URL names, and whether
    the probe may send ``PING`` there (not over TLS). O(len(url))."""
    parts = parse_url(redis_url)
    ping = parts.get("connection_class") is not SSLConnection
    path = parts.get("path")
    if isinstance(path, str):
        return path, ping
    return (str(parts.get("host", "localhost")), int(parts.get("port", 6379))), ping


async def answers(address: Address, timeout_ms: int, *, ping: bool = True) -> bool:
    """True if a connection to ``address`` opens (and, with ``ping``, a reply to
    ``PING`` begins) within ``timeout_ms``. Never raises for a network failure. O(1)."""
    try:
        async with asyncio.timeout(timeout_ms / 1000):
            if isinstance(address, str):
                reader, writer = await asyncio.open_unix_connection(address)
            else:
                reader, writer = await asyncio.open_connection(*address)
            try:
                if not ping:
                    return True
                writer.write(b"PING\r\n")
                return bool(await reader.read(1))
            finally:
                writer.close()  # the transport closes the socket at the loop's next turn
    except (OSError, TimeoutError, EOFError):
        return False
