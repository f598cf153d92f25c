"""The watch service on aiohttp in several worker processes on one port, its keys in Redis.

Usage: python examples/watch_aiohttp_workers.py --redis-url redis://127.0.0.1:6379/0
[--host 127.0.0.1] [--port 8080] [--workers 4] [--channel watch:keys]

The same API as ``examples/watch_aiohttp.py`` (``GET /watch/{key}``, ``GET /watch?keys=a,b``,
``POST /put/{key}``, ``GET /metrics``, each worker's own), plus ``GET /whoami``: the
worker's pid, its pending polls and whether its bridge is subscribed, as JSON. A put on
any worker wakes the polls on every worker. While Redis is unreachable, a put or a new
poll is answered 503 (``store unavailable: ...``); polls already waiting wait on.

Each worker binds its own socket to the port with ``SO_REUSEPORT`` (Linux spreads the
connections over the listening sockets) and serves :func:`watch_aiohttp.make_app` with
two additions:

* the store is a :class:`RedisStore`: the truth in Redis, a :class:`~watch_service.KeyStore`
  as this worker's cache. A put is one Lua script, so one atomic step in Redis: ``INCR``
  the store-wide revision, ``HSET`` the key's entry (``b"<version>:<value>"``) with it,
  ``PUBLISH`` the key event on the channel (the bridge's encoding, ``b"s" + key``). Then
  the worker puts the entry in its cache and checks its own polls. A poll is tried once
  its keys are loaded from Redis (one ``HMGET``), then waits, reading the cache;
* a :class:`~purgatory.contrib.redis.KeyEvents` bridge with ``refresh=store.refresh``:
  for every event it loads the key into the cache (the keys of a burst of events in one
  ``HMGET``), then checks the polls on it; after
  every (re)subscription it loads every watched key, then re-checks them. The cache
  keeps the newest version of each key (versions only go up), so replies read out of
  order never move it back.

Why not carry the new entry in the event? The bridge's encoding is one key per message,
and its publisher coalesces pending keys, so a value would need an encoding of its own;
and the re-check after a reconnect has no event to carry anything: it must read Redis
anyway. Reading Redis for every event keeps one path for both.

The store must outlive the workers: with a Redis that loses its data (restarted without
persistence) the revision starts again from 1, and caches that hold higher versions
ignore the new entries until they pass them. Use persistence (``appendonly yes``) for
this store.

The parent process starts the workers, and on SIGINT or SIGTERM sends SIGTERM to each
and waits for them (SHUTDOWN_S at most, then SIGKILL); a worker that stops by itself
stops the others too (exit status 1). A worker shuts down as ``watch_aiohttp`` does: it
stops listening, closes its purgatory (its pending polls are answered 503 at once), then
closes its bridge, its Redis client and its purgatory's context. On Linux a worker also
receives SIGTERM if the parent dies (``PR_SET_PDEATHSIG``). ``--port 0``: the parent binds
a socket (with ``SO_REUSEPORT``, not listening) to pick a free port for all the workers,
and keeps it bound until it exits.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Hashable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import redis.asyncio
from _cli import PORT, Parser, integer
from aiohttp import web
from aiohttp.typedefs import Handler
from redis.exceptions import RedisError
from watch_aiohttp import SERVICE, make_app, start
from watch_service import Entry, KeyStore, WatchService

from purgatory.contrib.redis import KeyEvents, encode_key

DEFAULT_CHANNEL = "watch:keys"
DEFAULT_PREFIX = "watch"
SHUTDOWN_S = 30.0  # the parent waits this long for each worker, then kills it

#: KEYS: the revision counter, the entries hash. ARGV: key, value, channel, event.
#: The revision is read back with GET: its exact decimal text (a Lua number would
#: lose digits past 2**53).
PUT_SCRIPT = """
redis.call('INCR', KEYS[1])
local revision = redis.call('GET', KEYS[1])
redis.call('HSET', KEYS[2], ARGV[1], revision .. ':' .. ARGV[2])
redis.call('PUBLISH', ARGV[3], ARGV[4])
return revision
"""


class RedisStore:
    """A :class:`~watch_service.Store` whose truth is in Redis: the revision at
    ``{prefix}:revision``, the entries in the hash ``{prefix}:entries``; ``cache`` (a
    KeyStore) is what polls read. Use as ``async with`` on the loop that serves."""

    def __init__(
        self, redis_url: str, *, channel: str = DEFAULT_CHANNEL, prefix: str = DEFAULT_PREFIX
    ) -> None:
        self.redis_url = redis_url
        self.channel = channel
        self.revision_key = f"{prefix}:revision"
        self.entries_key = f"{prefix}:entries"
        self.cache = KeyStore()
        self._client: redis.asyncio.Redis | None = None
        self._put: redis.commands.core.AsyncScript | None = None

    async def __aenter__(self) -> RedisStore:
        self._client = redis.asyncio.Redis.from_url(self.redis_url, decode_responses=False)
        self._put = self._client.register_script(PUT_SCRIPT)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        client, self._client, self._put = self._client, None, None
        if client is not None:
            await client.aclose()

    def _redis(self) -> redis.asyncio.Redis:
        if self._client is None:
            raise RuntimeError("the store is not open: use async with")
        return self._client

    def get(self, key: str) -> Entry:
        return self.cache.get(key)

    def newest(self, keys: Iterable[str], after: int) -> Entry | None:
        return self.cache.newest(keys, after)

    async def load(self, keys: Sequence[str]) -> None:
        """Bring the cache up to date for ``keys``: one HMGET."""
        if not keys:
            return
        raws: list[bytes | str | None] = await self._redis().hmget(self.entries_key, list(keys))
        for key, raw in zip(keys, raws, strict=True):
            if isinstance(raw, bytes):  # None: never put
                version, _, value = raw.partition(b":")
                self.cache.remember(Entry(key, int(version), value.decode()))

    async def refresh(self, keys: Sequence[Hashable]) -> None:
        """The bridge's ``refresh``: :meth:`load` for the (``str``) keys."""
        await self.load([key for key in keys if isinstance(key, str)])

    async def write(self, key: str, value: str) -> Entry:
        """Put in Redis and announce, in one step (PUT_SCRIPT); then into the cache."""
        self._redis()
        assert self._put is not None
        revision = await self._put(
            keys=[self.revision_key, self.entries_key],
            args=[key, value, self.channel, encode_key(key)],
        )
        entry = Entry(key, int(revision), value)
        self.cache.remember(entry)
        return entry


@dataclass
class Worker:
    """One worker's parts; ``events`` is set while the app runs."""

    service: WatchService
    store: RedisStore
    events: KeyEvents | None = None


WORKER = web.AppKey("worker", Worker)


async def whoami(request: web.Request) -> web.Response:
    worker = request.app[WORKER]
    body = {
        "pid": os.getpid(),
        "polls": worker.service.purgatory.num_delayed,
        "subscribed": worker.events is not None and worker.events.subscribed,
    }
    return web.json_response(body)


@web.middleware
async def store_unavailable(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Redis unreachable while a handler reads or writes the store: 503, one line."""
    try:
        return await handler(request)
    except (RedisError, OSError) as exc:
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return web.Response(status=503, text=f"store unavailable: {text}\n")


async def _redis_context(app: web.Application) -> AsyncIterator[None]:
    """Inside the purgatory's context (appended after it): the store's client and the
    bridge, closed before the purgatory's context ends."""
    worker = app[WORKER]
    store = worker.store
    async with (
        store,
        KeyEvents(
            worker.service.purgatory, store.redis_url, channel=store.channel, refresh=store.refresh
        ) as events,
    ):
        worker.events = events
        try:
            yield
        finally:
            worker.events = None


def make_worker_app(redis_url: str, channel: str = DEFAULT_CHANNEL) -> web.Application:
    """``watch_aiohttp.make_app`` on a :class:`RedisStore`, with its bridge and ``/whoami``."""
    store = RedisStore(redis_url, channel=channel)
    app = make_app(WatchService(store=store))
    app[WORKER] = Worker(app[SERVICE], store)
    app.cleanup_ctx.append(_redis_context)
    app.middlewares.append(store_unavailable)
    app.router.add_get("/whoami", whoami)
    return app


def reuseport_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` with SO_REUSEPORT (and SO_REUSEADDR), not
    listening yet."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


async def serve_worker(host: str, port: int, redis_url: str, channel: str) -> None:
    """One worker: serve on its own SO_REUSEPORT socket until SIGINT or SIGTERM."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    runner, bound = await start(
        make_worker_app(redis_url, channel), host, port, sock=reuseport_socket(host, port)
    )
    try:
        print(f"worker {os.getpid()} listening on {host}:{bound}", flush=True)
        await stop.wait()
    finally:
        await runner.cleanup()


def _die_with_parent() -> None:
    """In a worker, before exec: SIGTERM when the parent's thread ends (Linux)."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG


def run_workers(args: argparse.Namespace) -> int:
    """The parent: start the workers, wait for a signal (or a worker's end), stop them."""
    reserved = reuseport_socket(args.host, args.port)  # picks the port if 0
    stopping = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stopping.set())
    with reserved:
        bound = int(reserved.getsockname()[1])
        command = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--worker",
            *("--host", args.host, "--port", str(bound)),
            *("--redis-url", args.redis_url, "--channel", args.channel),
        ]
        workers: list[subprocess.Popen[bytes]] = []
        failed = False
        try:
            while len(workers) < args.workers:  # one by one: a failure stops those started
                workers.append(
                    subprocess.Popen(
                        command,
                        preexec_fn=_die_with_parent if sys.platform == "linux" else None,  # noqa: PLW1509
                    )
                )
            pids = " ".join(str(worker.pid) for worker in workers)
            print(f"listening on {args.host}:{bound} with workers {pids}", flush=True)
            while not stopping.wait(0.2):
                if any(worker.poll() is not None for worker in workers):
                    failed = True  # one ended by itself: stop the others
                    break
            print("shutting down", flush=True)
        finally:
            for worker in workers:
                if worker.poll() is None:
                    worker.send_signal(signal.SIGTERM)
            for worker in workers:
                try:
                    worker.wait(timeout=SHUTDOWN_S)
                except subprocess.TimeoutExpired:
                    worker.kill()
                    worker.wait()
    return 1 if failed or any(worker.returncode != 0 for worker in workers) else 0


def main(argv: list[str] | None = None) -> int:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1", help="address or host name to listen on")
    parser.add_argument(
        "--port", type=PORT, default=8080, help="TCP port; 0 picks a free port for all workers"
    )
    parser.add_argument("--workers", type=integer(1), default=4, help="worker processes")
    parser.add_argument("--redis-url", required=True, help="the store and the key events")
    parser.add_argument("--channel", default=DEFAULT_CHANNEL, help="Redis channel of key events")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve_worker(args.host, args.port, args.redis_url, args.channel))
        return 0
    return run_workers(args)


if __name__ == "__main__":
    sys.exit(main())
