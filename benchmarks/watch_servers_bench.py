"""The long-poll watch recipes (examples/watch_aiohttp.py, watch_starlette.py) beside
the same service written the naive asyncio way, under the same load, in one run.

Usage: python benchmarks/watch_servers_bench.py [--frameworks aiohttp,starlette]
       [--polls 5000] [--keys 1000] [--puts-per-s 40] [--duration-s 20] [--rounds 1]
       [--python-gc]

Each server in its own process (``--serve KIND``, on a socket it binds to 127.0.0.1
port 0), all on plain asyncio. A framework's servers run side by side, at the same
time, each under its own load, so that they share whatever the host does meanwhile:
run one after the other, the same server's CPU per answer drifted by up to 20 %
between runs a minute apart on a shared 2-core host (the 5-round runs in
benchmarks/HISTORY.md), more than the difference to resolve; side by side, each
round's recipe / naive ratios stayed within a few per cent. Then their shutdowns, one
at a time. ``--rounds N`` runs the frameworks N times and adds each round's recipe /
naive CPU ratio and their median:

* ``aiohttp recipe`` / ``starlette recipe``: the examples themselves (a
  ``WatchPoll`` per poll in a ``DelayedOperationPurgatory``; uvicorn is
  :class:`WatchServer`);
* ``aiohttp naive`` / ``starlette naive``: defined here, the same store, replies and
  routes (``GET /watch/{key}``, ``POST /put/{key}``) with a set of
  ``asyncio.Event`` per key and ``asyncio.timeout``: about 15 lines of handler
  (:class:`NaiveWatch`). aiohttp runs both with ``handler_cancellation=True``;
  the naive Starlette handler does not watch for disconnects (the recipe does: one
  more task per poll, counted in its CPU).

This process is the client of every server (on uvloop, raw HTTP/1.1 over keep-alive
connections): for each server, ``--polls`` pollers spread over ``--keys`` keys, each
re-polling as soon as it is answered (``after`` = the version it got; ``timeout_ms``
drawn from 2,000 to 8,000), and puts to random keys at ``--puts-per-s``, for
``--duration-s`` after every poller has sent its first poll. Then the pollers stop
once answered (up to 8 s), and when every server side by side is idle, one server at
a time: every one of its pollers sends one last poll with a 10 s timeout, and once
all are pending the server gets SIGTERM.

Per server: CPU per answered request (the server's utime + stime from
``/proc/PID/stat`` over the window, divided by the polls and puts answered in it),
its RSS at the window's end (``/proc/PID/status``), wake latency (a poll sent
before a put, answered with that put's version: poll answered - put answered; it
can be below 0 when the poll's answer arrives before the put's), and timeout
lateness twice: in the server (the handler's start -> its 304 handed to the
framework, minus ``timeout_ms``: what the service adds, the goal's figure; recorded
by a :class:`Probe` wrapped around every server alike, an aiohttp middleware or an
ASGI wrapper) and at the client (a 304's arrival - its deadline, both read on the
client: the round trip and the client's own stalls included). The server's probe
also records its collector's pauses (``gc.callbacks``) in the window, and
``/proc/PID/schedstat`` how long the server waited for a CPU (a busy host's share). Then
shutdown with ``--polls`` polls pending, from SIGTERM (sent by the client) to two
events: the last pending poll's answer read by the client, and the server's exit
(``waitpid``; this includes the interpreter's own teardown), and how the polls
were answered. Every server serves in ``watch_service.tuned_gc()``, as the
recipes' ``main`` does (``--python-gc``: the collector as Python sets it); the
client calms its own collector over the window (``tuned_gc(CLIENT_GC_THRESHOLD0)``).
Everything this starts is stopped by its pid (SIGKILL after 60 s at the latest).

Usage for the goals of issue #26 (lateness p99 in the server at most tick + 5 ms,
shutdown under 1 s, CPU per answer not above naive): the default run prints them
all in one table; ``--python-gc`` beside it shows what the collector costs.
"""

from __future__ import annotations

import argparse
import array
import asyncio
import gc
import json
import os
import platform
import random
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))

from _cli import Parser, integer  # noqa: E402
from _machine import cpu_model  # noqa: E402

# isort: split
from watch_service import (  # noqa: E402
    NOT_MODIFIED,
    BadRequest,
    KeyStore,
    Reply,
    WatchService,
    error,
    ok,
    parse_watch,
    tuned_gc,
)

#: the servers of each framework: the recipe, the naive version, and on Starlette the
#: naive version that also drops a wait whose client left, as the recipe does (aiohttp
#: does it for both: ``handler_cancellation``)
KINDS = {"aiohttp": ("recipe", "naive"), "starlette": ("recipe", "naive", "naive-gone")}
LAST_POLL_MS = 10_000  # the polls pending at shutdown: a server that waits, waits this long
KILL_AFTER_S = 60.0


# -- what the servers record about themselves --------------------------------------


class Probe:
    """What a server process records of itself, for the client to read after it exits:
    each 304's lateness measured inside the server (the handler's start -> its 304
    handed to the framework, minus ``timeout_ms``: no network, no client) and each
    pause of the cyclic garbage collector (``gc.callbacks``). Times are
    ``time.monotonic()``, which Linux keeps system-wide, so the client can cut them
    to its window. The same probe wraps the recipes and the naive servers."""

    FIELDS = ("late_at", "late_ms", "gc_at", "gc_ms")

    def __init__(self) -> None:
        self.late_at, self.late_ms = array.array("d"), array.array("d")
        self.gc_at, self.gc_ms = array.array("d"), array.array("d")
        self._gc_start = 0.0

    def timed_out(self, start: float, timeout_ms: int) -> None:
        self.late_at.append(start)
        self.late_ms.append((time.monotonic() - start) * 1000 - timeout_ms)

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_start = time.perf_counter()
        else:
            self.gc_at.append(time.monotonic())
            self.gc_ms.append((time.perf_counter() - self._gc_start) * 1000)

    @contextmanager
    def watching_gc(self) -> Iterator[None]:
        gc.callbacks.append(self._on_gc)
        try:
            yield
        finally:
            gc.callbacks.remove(self._on_gc)

    def write(self, path: str) -> None:
        """Raw doubles, one array after the other, each after its length."""
        with open(path, "wb") as f:
            for name in self.FIELDS:
                values: array.array[float] = getattr(self, name)
                array.array("q", [len(values)]).tofile(f)
                values.tofile(f)

    @staticmethod
    def read(path: str) -> dict[str, list[float]]:
        out: dict[str, list[float]] = {}
        with open(path, "rb") as f:
            for name in Probe.FIELDS:
                length = array.array("q")
                length.fromfile(f, 1)
                values = array.array("d")
                values.fromfile(f, length[0])
                out[name] = values.tolist()
        return out


def timeout_of(query: str | bytes) -> int:
    text = query.decode() if isinstance(query, bytes) else query
    return int(parse_qs(text)["timeout_ms"][0])


# -- the naive servers -------------------------------------------------------------


class NaiveWatch:
    """The watch service the naive way: a set of asyncio.Event per key, asyncio.timeout."""

    def __init__(self) -> None:
        self.store = KeyStore()
        self.waiters: dict[str, set[asyncio.Event]] = {}

    def put(self, key: str, body: bytes) -> Reply:
        entry = self.store.put(key, body.decode())
        for event in self.waiters.pop(key, ()):
            event.set()
        return ok(entry)

    async def watch(self, key: str, after: str | None, timeout_ms: str | None) -> Reply:
        try:
            request = parse_watch([key], after, timeout_ms)
        except BadRequest as exc:
            return error(400, str(exc))
        event = asyncio.Event()
        try:
            async with asyncio.timeout(request.timeout_ms / 1000):
                while (entry := self.store.newest(request.keys, request.after)) is None:
                    event.clear()
                    self.waiters.setdefault(key, set()).add(event)
                    await event.wait()
        except TimeoutError:
            return NOT_MODIFIED
        finally:
            waiting = self.waiters.get(key)
            if waiting is not None:
                waiting.discard(event)
                if not waiting:
                    del self.waiters[key]
        return ok(entry)


async def serve_aiohttp(kind: str, sock: socket.socket, probe: Probe) -> None:
    from aiohttp import web
    from watch_aiohttp import make_app

    @web.middleware
    async def probing(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        start = time.monotonic()
        response = await handler(request)
        if response.status == 304:
            probe.timed_out(start, timeout_of(request.query_string))
        return response

    if kind == "recipe":
        app = make_app()
        app.middlewares.append(probing)
    else:
        naive = NaiveWatch()

        async def watch(request: web.Request) -> web.Response:
            query = request.query
            reply = await naive.watch(
                request.match_info["key"], query.get("after"), query.get("timeout_ms")
            )
            return web.Response(status=reply.status, body=reply.body or None, headers=reply.headers)

        async def put(request: web.Request) -> web.Response:
            reply = naive.put(request.match_info["key"], await request.read())
            return web.Response(status=reply.status, body=reply.body, headers=reply.headers)

        app = web.Application(middlewares=[probing])
        app.add_routes([web.get("/watch/{key}", watch), web.post("/put/{key}", put)])
    runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
    await runner.setup()
    await web.SockSite(runner, sock, backlog=4096).start()
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    print("serving", flush=True)
    await stop.wait()
    await runner.cleanup()


def probing_asgi(app: Any, probe: Probe) -> Any:
    """``app`` with each 304's lateness recorded in ``probe`` (see :class:`Probe`)."""

    async def probed(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await app(scope, receive, send)  # type: ignore[no-any-return]
        start = time.monotonic()

        async def sending(message: Any) -> None:
            if message["type"] == "http.response.start" and message["status"] == 304:
                probe.timed_out(start, timeout_of(scope["query_string"]))
            await send(message)

        return await app(scope, receive, sending)  # type: ignore[no-any-return]

    return probed


async def until_gone(request: Any, waiting: Awaitable[Reply]) -> Reply | None:
    """The naive Starlette server's way to drop a wait whose client left, as the recipe
    does it (``watch_starlette.client_gone``, a task per poll awaiting the ASGI
    ``http.disconnect``), the wait then cancelled; None if it was."""
    from watch_starlette import client_gone

    handler = asyncio.current_task()
    assert handler is not None
    answered = False

    async def cancel_when_gone() -> None:
        await client_gone(request.receive)
        if not answered:
            handler.cancel()

    watcher = asyncio.ensure_future(cancel_when_gone())
    try:
        reply = await waiting
    except asyncio.CancelledError:
        if watcher.done() and handler.uncancel() == 0:
            return None  # its client went away
        watcher.cancel()
        raise
    answered = True
    return reply


async def serve_starlette(kind: str, sock: socket.socket, probe: Probe) -> None:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route
    from watch_starlette import WatchServer, make_app

    # uvicorn closes a connection idle for 5 s; the pollers wait idle for the other
    # servers' shutdowns before their last poll
    options: dict[str, object] = {
        "lifespan": "on",
        "access_log": False,
        "log_level": "warning",
        "timeout_keep_alive": 3600,
    }
    if kind == "recipe":
        service = WatchService()
        app = probing_asgi(make_app(service), probe)
        server: uvicorn.Server = WatchServer(uvicorn.Config(app, **options), service)  # type: ignore[arg-type]
    else:
        naive = NaiveWatch()
        watches_disconnects = kind == "naive-gone"

        async def watch(request: Request) -> Response:
            query = request.query_params
            waiting = naive.watch(
                request.path_params["key"], query.get("after"), query.get("timeout_ms")
            )
            reply = await (until_gone(request, waiting) if watches_disconnects else waiting)
            if reply is None:
                return Response(status_code=499)
            return Response(reply.body or None, status_code=reply.status, headers=reply.headers)

        async def put(request: Request) -> Response:
            reply = naive.put(request.path_params["key"], await request.body())
            return Response(reply.body, status_code=reply.status, headers=reply.headers)

        naive_app = Starlette(
            routes=[Route("/watch/{key}", watch), Route("/put/{key}", put, methods=["POST"])]
        )
        server = uvicorn.Server(uvicorn.Config(probing_asgi(naive_app, probe), **options))  # type: ignore[arg-type]
    # uvicorn handles SIGTERM (a graceful shutdown), then raises it again for the
    # handler it found: this one lets the process go on to write its probe
    signal.signal(signal.SIGTERM, lambda signum, frame: None)
    print("serving", flush=True)
    await server.serve(sockets=[sock])


def serve(name: str, probe_path: str, python_gc: bool) -> None:
    """The child: bind 127.0.0.1:0, say the port, serve until SIGTERM, then write what
    its :class:`Probe` recorded to ``probe_path``. In ``tuned_gc()`` as the recipes'
    ``main`` runs (naive servers too), unless ``python_gc``: the collector as Python
    sets it."""
    framework, kind = name.split("-", 1)
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    # proto IPPROTO_TCP, as getaddrinfo gives it: asyncio sets TCP_NODELAY on accepted
    # connections only then (with proto 0, uvicorn's separate header and body writes
    # would wait for the client's delayed ACK: 40 ms a response)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(4096)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    run = serve_aiohttp if framework == "aiohttp" else serve_starlette
    probe = Probe()
    with nullcontext() if python_gc else tuned_gc(), probe.watching_gc():
        asyncio.run(run(kind, sock, probe))
    probe.write(probe_path)


# -- the client --------------------------------------------------------------------


class Conn:
    """One keep-alive HTTP/1.1 connection, written by hand (the client must cost little)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int) -> Conn:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer)

    async def request(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        head = f"{method} {path} HTTP/1.1\r\nHost: bench\r\nContent-Length: {len(body)}\r\n\r\n"
        self.writer.write(head.encode() + body)
        lines = (await self.reader.readuntil(b"\r\n\r\n")).split(b"\r\n")
        status = int(lines[0].split(b" ", 2)[1])
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        return status, await self.reader.readexactly(length) if length else b""

    def close(self) -> None:
        self.writer.transport.abort()


@dataclass
class Load:
    """What the client saw of one server."""

    answered: int = 0  # polls and puts answered inside the window
    in_window: bool = False
    polls_200: int = 0
    polls_304: int = 0
    wake_ms: list[float] = field(default_factory=list)
    lateness_ms: list[float] = field(default_factory=list)
    put_sent: dict[int, float] = field(default_factory=dict)  # version -> sent, answered
    put_answered: dict[int, float] = field(default_factory=dict)
    held: int = 0  # pollers that stopped polling after the window
    last_polls: list[str] = field(default_factory=list)  # how the shutdown's polls ended
    last_ended_at: float = 0.0  # when the last of them ended (answered or dropped)


async def poller(
    port: int,
    key: str,
    load: Load,
    rng: random.Random,
    *,
    hold: asyncio.Event,
    go_last: asyncio.Event,
) -> None:
    conn = await Conn.open(port)
    after = 0
    try:
        while not hold.is_set():
            timeout_ms = rng.randint(2000, 8000)
            sent = time.monotonic()
            sent_in_window = load.in_window  # the start's burst of connects is left out
            status, body = await conn.request(
                "GET", f"/watch/{key}?after={after}&timeout_ms={timeout_ms}"
            )
            got = time.monotonic()
            if load.in_window:
                load.answered += 1
            if status == 200:
                load.polls_200 += 1
                after = int(json.loads(body)["version"])
                put_at = load.put_answered.get(after)
                if put_at is not None and sent_in_window and sent < load.put_sent[after]:
                    load.wake_ms.append((got - put_at) * 1000)
            elif status == 304:
                load.polls_304 += 1
                if sent_in_window:
                    load.lateness_ms.append((got - sent) * 1000 - timeout_ms)
        load.held += 1
        await go_last.wait()
        load.last_polls.append("sent")
        try:
            status, _ = await conn.request(
                "GET", f"/watch/{key}?after={after}&timeout_ms={LAST_POLL_MS}"
            )
            load.last_polls.append(str(status))
        except (OSError, asyncio.IncompleteReadError):
            load.last_polls.append("dropped")
        load.last_ended_at = max(load.last_ended_at, time.monotonic())
    finally:
        conn.close()


async def putter(
    port: int, keys: Sequence[str], rate: float, load: Load, stop: asyncio.Event
) -> None:
    conns = [await Conn.open(port) for _ in range(8)]
    free: asyncio.Queue[Conn] = asyncio.Queue()
    for conn in conns:
        free.put_nowait(conn)
    rng = random.Random(7)

    async def one() -> None:
        conn = await free.get()
        sent = time.monotonic()
        _status, body = await conn.request("POST", f"/put/{rng.choice(keys)}", b"v")
        version = int(json.loads(body)["version"])
        load.put_sent[version] = sent
        load.put_answered[version] = time.monotonic()
        if load.in_window:
            load.answered += 1
        free.put_nowait(conn)

    tasks: set[asyncio.Task[None]] = set()
    start = time.monotonic()
    n = 0
    try:
        while not stop.is_set():
            n += 1
            task = asyncio.ensure_future(one())
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            await asyncio.sleep(max(0.0, start + n / rate - time.monotonic()))
        if tasks:
            await asyncio.wait(tasks)
    finally:
        for conn in conns:
            conn.close()


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_queue_s(pid: int) -> float:
    """Time the process's main thread has waited for a CPU while runnable
    (``/proc/PID/schedstat``'s second field): the host's share of its stalls."""
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[1]) / 1e9


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def quantile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, int(q * len(ordered) + 0.999999) - 1))]


#: the client's first collector threshold over the window (in ``tuned_gc``): what exists
#: is frozen (the 5,000 connections are not walked again) and young collections are
#: rarer, so the client's pauses add less to the lateness it reads
CLIENT_GC_THRESHOLD0 = 100_000


def p50_p99(values: list[float]) -> tuple[float, float]:
    return quantile(values, 0.5), quantile(values, 0.99)


@dataclass
class Row:
    name: str
    answered: int
    cpu_us: float
    rss_mib: float
    wake: tuple[float, float]
    lateness: tuple[float, float]  # on the client: the round trip included
    server_lateness: tuple[float, float]  # in the server: handler start -> 304
    gc_pauses: tuple[int, float, float]  # the server's, in the window: count, total, max ms
    queued_s: float  # the server's wait for a CPU in the window (a busy host)
    answered_s: float  # SIGTERM -> the last pending poll's answer read by the client
    exited_s: float  # SIGTERM -> the process has exited
    last: str

    @property
    def kind(self) -> str:
        """``recipe``, ``naive``, ...: the name without its framework."""
        return self.name.split("-", 1)[1]


async def bench_one(
    name: str, args: argparse.Namespace, quiet: asyncio.Barrier, shutdowns: asyncio.Lock
) -> Row:
    """Serve, load and measure one server. After its window its pollers stop once
    answered; its shutdown then waits until all servers side by side are idle
    (``quiet``) and for ``shutdowns``, so that they shut down one at a time, alone."""
    probe_file = tempfile.NamedTemporaryFile(prefix="watch-probe-", delete=False)  # noqa: SIM115
    probe_file.close()
    command = [sys.executable, __file__, "--serve", name, "--probe", probe_file.name]
    command += ["--python-gc"] if args.python_gc else []
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline().split()[1])
        assert proc.stdout.readline().strip() == "serving"
        await asyncio.sleep(0.5)  # uvicorn's startup runs after it says so
        load = Load()
        keys = [f"key{i}" for i in range(args.keys)]
        hold, go_last, stop_puts = asyncio.Event(), asyncio.Event(), asyncio.Event()
        rng = random.Random(1)
        pollers: list[Awaitable[None]] = []
        for i in range(args.polls):
            pollers.append(
                asyncio.ensure_future(
                    poller(port, keys[i % args.keys], load, rng, hold=hold, go_last=go_last)
                )
            )
            if i % 200 == 199:
                await asyncio.sleep(0.01)  # connect in waves: the backlog is finite
        puts = asyncio.ensure_future(putter(port, keys, args.puts_per_s, load, stop_puts))
        await asyncio.sleep(1.0)
        with tuned_gc(CLIENT_GC_THRESHOLD0):
            load.in_window, cpu0 = True, cpu_s(proc.pid)
            queued0 = run_queue_s(proc.pid)
            window = [time.monotonic()]
            await asyncio.sleep(args.duration_s)
            load.in_window, cpu1 = False, cpu_s(proc.pid)
            queued = run_queue_s(proc.pid) - queued0
            window.append(time.monotonic())
            rss = rss_mib(proc.pid)
            hold.set()
            stop_puts.set()
            await puts
        async with asyncio.timeout(KILL_AFTER_S):  # the polls in flight end (timeouts <= 8 s)
            while load.held < args.polls:
                await asyncio.sleep(0.05)
        await quiet.wait()  # every server side by side idle: no load but the shutdown's
        async with shutdowns:
            go_last.set()
            async with asyncio.timeout(KILL_AFTER_S):
                while load.last_polls.count("sent") < args.polls:
                    await asyncio.sleep(0.05)
            await asyncio.sleep(0.5)  # the last polls reach the server
            started = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            await asyncio.get_running_loop().run_in_executor(None, proc.wait, KILL_AFTER_S)
            exited_s = time.monotonic() - started
            async with asyncio.timeout(KILL_AFTER_S):
                await asyncio.gather(*pollers)
        ends = [s for s in load.last_polls if s != "sent"]
        last = ", ".join(f"{ends.count(s)} {s}" for s in sorted(set(ends)))
        probe = Probe.read(probe_file.name)
        start, end = window
        server_late = [
            late
            for at, late in zip(probe["late_at"], probe["late_ms"], strict=True)
            if start <= at < end
        ]
        pauses = [
            ms for at, ms in zip(probe["gc_at"], probe["gc_ms"], strict=True) if start <= at < end
        ]
        return Row(
            name,
            load.answered,
            (cpu1 - cpu0) * 1e6 / max(1, load.answered),
            rss,
            p50_p99(load.wake_ms),
            p50_p99(load.lateness_ms),
            p50_p99(server_late),
            (len(pauses), sum(pauses), max(pauses, default=0.0)),
            queued,
            load.last_ended_at - started,
            exited_s,
            last,
        )
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        os.unlink(probe_file.name)


def print_table(rows: list[Row]) -> None:
    print(
        "| server | answered | CPU µs / answer | RSS MiB | wake p50 / p99 ms "
        "| timeout lateness in server p50 / p99 ms | at client p50 / p99 ms "
        "| server GC pauses: n, total / max ms | server waited for a CPU s "
        "| shutdown: answered / exited s "
        "| the pending polls at shutdown |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        print(
            f"| {r.name} | {r.answered:,} | {r.cpu_us:,.0f} | {r.rss_mib:.0f} "
            f"| {r.wake[0]:.1f} / {r.wake[1]:.1f} "
            f"| {r.server_lateness[0]:.1f} / {r.server_lateness[1]:.1f} "
            f"| {r.lateness[0]:.1f} / {r.lateness[1]:.1f} "
            f"| {r.gc_pauses[0]}, {r.gc_pauses[1]:.0f} / {r.gc_pauses[2]:.0f} | {r.queued_s:.2f} "
            f"| {r.answered_s:.2f} / {r.exited_s:.2f} | {r.last} |"
        )


def print_rounds(rows: list[Row], frameworks: Sequence[str]) -> None:
    """Over ``--rounds``: each server's median CPU per answer, and each round's
    recipe / naive ratio (the two ran side by side in that round) with their
    median: what decides "not above the naive version's" on a host whose speed drifts
    between runs."""
    print(
        "\n| recipe against | recipe / naive CPU per answer, each round | median ratio "
        "| median µs / answer: recipe, naive |"
    )
    print("|---|---|---:|---:|")
    for framework in frameworks:
        recipe = [r.cpu_us for r in rows if r.name == f"{framework}-recipe"]
        for kind in KINDS[framework][1:]:
            naive = [r.cpu_us for r in rows if r.name == f"{framework}-{kind}"]
            ratios = [a / b for a, b in zip(recipe, naive, strict=True)]
            print(
                f"| {framework}-{kind} | {', '.join(f'{x:.2f}' for x in ratios)} "
                f"| {statistics.median(ratios):.2f} "
                f"| {statistics.median(recipe):,.0f}, {statistics.median(naive):,.0f} |"
            )


async def bench(args: argparse.Namespace) -> None:
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    rows = []
    for round_ in range(args.rounds):
        # alternate which kind starts first and shuts down first, so neither always meets
        # the warmer host
        for framework in args.frameworks:
            kinds = KINDS[framework] if round_ % 2 == 0 else KINDS[framework][::-1]
            print(f"{framework} (round {round_ + 1}) ...", file=sys.stderr, flush=True)
            quiet, shutdowns = asyncio.Barrier(len(kinds)), asyncio.Lock()
            measured = await asyncio.gather(
                *(bench_one(f"{framework}-{kind}", args, quiet, shutdowns) for kind in kinds)
            )
            rows.extend(sorted(measured, key=lambda row: KINDS[framework].index(row.kind)))
    print_table(rows)
    if args.rounds > 1:
        print_rounds(rows, args.frameworks)


def main(argv: list[str] | None = None) -> int:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--frameworks", type=lambda s: s.split(","), default=["aiohttp", "starlette"]
    )
    parser.add_argument("--polls", type=integer(1), default=5000, help="concurrent long polls")
    parser.add_argument("--keys", type=integer(1), default=1000)
    parser.add_argument("--puts-per-s", type=float, default=40.0)
    parser.add_argument("--duration-s", type=float, default=20.0)
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run every server this many times, alternating which kind goes first; "
        "with more than one, print each round's recipe / naive CPU ratio and the medians",
    )
    parser.add_argument(
        "--python-gc",
        action="store_true",
        help="leave every server's cyclic collector as Python sets it "
        "(by default each serves in watch_service.tuned_gc(), as the recipes' main does)",
    )
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--probe", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.serve, args.probe, args.python_gc)
        return 0
    if not set(args.frameworks) <= {"aiohttp", "starlette"} or min(args.polls, args.keys) < 1:
        parser.error("--frameworks takes aiohttp,starlette; --polls and --keys at least 1")
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    print(
        f"{platform.python_version()} on {os.cpu_count()} CPUs ({cpu_model()}); "
        f"load average {os.getloadavg()[0]:.2f}; {args.polls} polls over {args.keys} keys, "
        f"{args.puts_per_s:g} puts/s, {args.duration_s:g} s, {args.rounds} round(s); servers' gc "
        f"{'as Python sets it' if args.python_gc else 'tuned_gc()'}",
        flush=True,
    )
    import uvloop

    uvloop.run(bench(args))
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
