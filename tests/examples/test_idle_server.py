"""The idle-connection server of examples/idle_server.py, with real TCP clients on loopback.

Nothing here depends on the machine's speed. The reaping tests run the server's
timer on a :class:`~purgatory.testing.ManualClock` that only the test moves (the
sockets and the loop are real): every connection is made at one instant of that
clock, none is reaped 1 ms before its deadline (never early), every silent one is
reaped 1 ms after it, and a chatty one (touched each round 1 ms before its
deadline) never is, however long the connects, the talk and the reaper's
wake-ups take in real time. How late a reap comes in real time is a timer's
lateness, a benchmark's figure (``benchmarks/timer_bench.py --lateness``). Waits
are polls for a condition with a generous hang guard.
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
import select
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import cast

import pytest

from purgatory import SystemTimer
from purgatory.testing import ManualClock

from ..repo_kit import need
from .example_cli import error_line, run_example

EXAMPLES = need("examples/idle_server.py") / "examples"
sys.path.insert(0, str(EXAMPLES))
from idle_server import GOODBYE, SHUTDOWN, IdleServer  # noqa: E402

HANG_GUARD_S = 60.0  # what must happen fails only if not done by then: no timing claim


class Client(asyncio.Protocol):
    """A loopback client that records what it receives and when its connection ends."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.received = bytearray()
        self.closed: asyncio.Future[float] = self.loop.create_future()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is no subclass

    def data_received(self, data: bytes) -> None:
        self.received += data

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(self.loop.time())

    def send(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)


async def connect(port: int) -> Client:
    loop = asyncio.get_running_loop()
    _, client = await loop.create_connection(Client, "127.0.0.1", port)
    return client


async def connect_many(port: int, n: int, batch: int = 250) -> list[Client]:
    clients: list[Client] = []
    for lo in range(0, n, batch):
        clients += await asyncio.gather(*(connect(port) for _ in range(min(batch, n - lo))))
    return clients


@contextlib.asynccontextmanager
async def running(server: IdleServer, clients: list[Client]) -> AsyncIterator[None]:
    """Close the server and every client transport, whatever the test did."""
    try:
        yield
    finally:
        await server.close()
        for client in clients:
            if client.transport is not None and not client.closed.done():
                client.transport.abort()
        if clients:
            await asyncio.wait([c.closed for c in clients], timeout=HANG_GUARD_S)


async def wait_until(
    predicate: Callable[[], bool], timeout_s: float, state: Callable[[], str] = str
) -> None:
    """Until ``predicate()``; past ``timeout_s`` (a hang guard), fail saying ``state()``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not predicate():
        assert loop.time() < deadline, f"condition not reached in time {state()}"
        await asyncio.sleep(0.01)


@pytest.fixture
def many_fds() -> Iterator[int]:
    """Raise the open-file limit for thousands of connections (two fds each); skip if
    the hard limit forbids it. The old limit is restored afterwards."""
    need = 2 * 3000 + 256
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < need:
        if hard != resource.RLIM_INFINITY and hard < need:
            pytest.skip(f"RLIMIT_NOFILE hard limit {hard} < {need} fds needed for 3000 connections")
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
        except (ValueError, OSError) as exc:
            pytest.skip(f"cannot raise RLIMIT_NOFILE to {need}: {exc}")
    try:
        yield need
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="timeout_ms must be a positive int"):
        IdleServer(0)
    with pytest.raises(ValueError, match="port must be an int"):
        IdleServer(100, port=70000)


async def wait_closed(clients: list[Client], what: str) -> None:
    """Wait until every client's connection has ended; a hang guard, not a timing claim."""
    done, _ = await asyncio.wait([c.closed for c in clients], timeout=HANG_GUARD_S)
    assert len(done) == len(clients), f"{len(clients) - len(done)} {what} not closed"


async def reaper_polls(server: IdleServer) -> None:
    """Wait until the reaper has woken (and so polled the timer: it polls at once
    on waking) at least twice from now, so at least once at the clock's time now."""
    woken = server.timer.reaper_wakeups
    await wait_until(lambda: server.timer.reaper_wakeups >= woken + 2, HANG_GUARD_S)


async def talk_round(server: IdleServer, clock: ManualClock, chatty: list[Client]) -> None:
    """Move the clock to 1 ms short of every deadline, have the chatty clients talk,
    wait until the server has touched each of them at that time and the reaper
    has polled at it: nobody is reaped yet (never early)."""
    clock.advance(server.timeout_ms - 1)
    now_ms = clock.now_ms()
    for client in chatty:
        client.send(b".")
    tracker = server.tracker

    def touched() -> int:
        return sum(tracker.last_touch_ms(key) == now_ms for key in tracker)

    def state() -> str:  # what a failure needs to tell a lost write from a reaped client
        closing = sum(c.transport is None or c.transport.is_closing() for c in chatty)
        return (
            f"(clock {now_ms}: touched {touched()} of {len(chatty)} chatty, "
            f"{closing} of them closing; tracked {sum(1 for _ in tracker)}, "
            f"connections {server.connections}, reaped {server.reaped}, "
            f"reaper wake-ups {server.timer.reaper_wakeups})"
        )

    await wait_until(lambda: touched() == len(chatty), HANG_GUARD_S, state)
    reaped = server.reaped
    await reaper_polls(server)
    assert server.reaped == reaped, "reaped before its timeout"


async def reap_silent_keep_chatty(
    server: IdleServer, clock: ManualClock, silent: list[Client], chatty: list[Client]
) -> None:
    """The idle timeout in the server's clock, which only the test moves: every
    connection was made at the clock's time now; the chatty ones talk each round 1 ms
    before their deadline; the silent ones go 1 ms past theirs and are reaped, the
    chatty ones live on through three timeouts. However slow the machine, the same."""
    await talk_round(server, clock, chatty)
    assert server.connections == len(silent) + len(chatty)
    clock.advance(2)  # the silent ones' deadline passed; the chatty ones' is a timeout on
    await wait_closed(silent, "silent connections reaped")
    assert server.reaped == len(silent)
    for _ in range(2):  # the chatty ones outlive three timeouts
        await talk_round(server, clock, chatty)
    assert not any(c.closed.done() for c in chatty), "a chatty connection was reaped"
    assert server.reaped == len(silent) and server.connections == len(chatty)


@pytest.fixture
def idle_timer(clock: ManualClock) -> SystemTimer:
    """Tick 10 on the manual clock, Kafka's filing: a connection is reaped on the tick of
    its deadline (the default files it at the next tick: tests/core/test_idle.py)."""
    return SystemTimer("idle", tick_ms=10, clock=clock, may_expire_early=True)


@pytest.mark.asyncio
async def test_silent_connections_are_reaped_and_chatty_ones_kept(
    clock: ManualClock, idle_timer: SystemTimer
) -> None:
    server = IdleServer(300, timer=idle_timer)
    clients: list[Client] = []
    async with idle_timer, running(server, clients):
        await server.start()
        assert server.port != 0
        silent = await connect_many(server.port, 10)
        chatty = await connect_many(server.port, 5)
        clients += silent + chatty
        await wait_until(lambda: server.accepted == len(clients), HANG_GUARD_S)
        await reap_silent_keep_chatty(server, clock, silent, chatty)
        assert all(client.received == GOODBYE for client in silent)
        assert server.accepted == len(clients)
        server.tracker._check_invariants()
        for client in chatty:  # a client closing by itself is forgotten, not reaped
            assert client.transport is not None
            client.transport.close()
        await wait_until(lambda: server.connections == 0, HANG_GUARD_S)
        assert len(server.tracker) == 0 and server.reaped == len(silent)
        assert all(c.received == b"" for c in chatty)


@pytest.mark.asyncio
async def test_close_says_goodbye_to_every_connection() -> None:
    server = IdleServer(60_000)
    clients: list[Client] = []
    async with running(server, clients):
        await server.start()
        timer = server.timer
        assert timer.reaper_wakeups >= 0 and "reaper=running" in repr(timer)
        clients += await connect_many(server.port, 20)
        await wait_until(lambda: server.connections == 20, HANG_GUARD_S)
        await server.close()
        assert server.connections == 0 and server.shut_down == 20 and server.reaped == 0
        assert len(server.tracker) == 0 and len(timer) == 0
        assert "reaper=stopped" in repr(timer)
        await asyncio.wait([c.closed for c in clients], timeout=HANG_GUARD_S)
        assert all(c.closed.done() and c.received == SHUTDOWN for c in clients)
        with pytest.raises(OSError):
            await connect(server.port)  # no longer listening


@pytest.mark.asyncio
async def test_three_thousand_connections_at_once(
    many_fds: int, clock: ManualClock, idle_timer: SystemTimer
) -> None:
    n_silent, n_chatty = 2000, 1000
    server = IdleServer(1000, timer=idle_timer)
    clients: list[Client] = []
    async with idle_timer, running(server, clients):
        await server.start()
        chatty: list[Client] = []
        silent: list[Client] = []
        for _ in range(4):  # interleaved: chatty clients talk while the rest connect
            chatty += await connect_many(server.port, n_chatty // 4)
            for client in chatty:
                client.send(b".")
            silent += await connect_many(server.port, n_silent // 4)
        clients += silent + chatty
        await wait_until(lambda: server.accepted == n_silent + n_chatty, HANG_GUARD_S)
        await reap_silent_keep_chatty(server, clock, silent, chatty)
        assert len(server.tracker) == n_chatty
        server.tracker._check_invariants()
        assert all(c.received == GOODBYE for c in silent)
        await server.close()
        assert server.connections == 0 and server.shut_down == n_chatty
        await wait_closed(chatty, "chatty connections shut down")
        assert all(c.received == SHUTDOWN for c in chatty)


def _read_line(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    return proc.stdout.readline()


@pytest.mark.parametrize("how", ["sigterm", "run-for-s"])
def test_command_line_server(how: str) -> None:
    """The script itself: it reaps a silent client, then shuts down cleanly on SIGTERM
    (saying goodbye to a connected client) or after --run-for-s. A real process on
    real time: the margins are wide (the kept client talks every 50 ms against a
    1 s timeout until its goodbye comes; the run lasts 4 s past the silent client's
    reap)."""
    args = [
        sys.executable,
        str(EXAMPLES / "idle_server.py"),
        "--port",
        "0",
        "--timeout-ms",
        "1000",
        "--report-s",
        "0.1",
    ]
    if how == "run-for-s":
        args += ["--run-for-s", "5", "--uvloop"]
    with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        try:
            assert _read_line(proc).startswith("event loop:")
            line = _read_line(proc)
            assert line.startswith("listening on 127.0.0.1:"), line
            port = int(line.split(":")[1].split(",")[0])
            with socket.create_connection(("127.0.0.1", port), timeout=HANG_GUARD_S) as silent:
                assert _read_to_eof(silent) == GOODBYE
            with socket.create_connection(("127.0.0.1", port), timeout=HANG_GUARD_S) as kept:
                kept.sendall(b"hello\n")
                if how == "sigterm":
                    proc.send_signal(signal.SIGTERM)
                for _ in range(1200):  # chatty until the server says goodbye (< 60 s)
                    kept.sendall(b".")
                    if select.select([kept], [], [], 0.05)[0]:
                        break
                assert _read_to_eof(kept) == SHUTDOWN
            out, err = proc.communicate(timeout=HANG_GUARD_S)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 0, err
    assert "shutting down" in out
    assert out.rstrip().splitlines()[-1].startswith("closed; connections 0")
    assert "reaped 1" in out and "shut down 1" in out


def _read_to_eof(sock: socket.socket) -> bytes:
    data = bytearray()
    while chunk := sock.recv(4096):  # the socket's timeout bounds each wait
        data += chunk
    return bytes(data)


@pytest.mark.asyncio
async def test_shutdown_reaches_a_client_whose_last_bytes_were_not_read_yet() -> None:
    """Closing a socket with unread bytes makes the kernel send a reset, which can
    destroy the goodbye before the client reads it: the server half-closes, keeps
    reading, and closes only once the client has seen the goodbye and left."""
    for _ in range(10):  # the race is in the kernel: try it a few times
        server = IdleServer(60_000)
        await server.start()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            await wait_until(lambda s=server: s.connections == 1, HANG_GUARD_S)  # type: ignore[misc]
            writer.write(b"x" * 65536)  # arrives while the server shuts down
            closing = asyncio.ensure_future(server.close())
            got = await asyncio.wait_for(reader.read(), HANG_GUARD_S)
            assert got == SHUTDOWN
            writer.close()
            await closing
            assert server.connections == 0 and server.shut_down == 1
        finally:
            await server.close()


# -- the command line's bad input: one error line, no traceback, nothing left ------------


def _run_refused(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the server with ``args`` in an empty folder; it must leave it empty."""
    result = run_example("idle_server.py", *args, cwd=tmp_path)
    assert list(tmp_path.iterdir()) == []
    return result


@pytest.mark.parametrize(
    ("args", "mentions"),
    [
        (["--port", "70000"], "argument --port: must be an integer from 0 to 65535, not 70000"),
        (["--port", "-1"], "argument --port"),
        (["--port", "http"], "argument --port"),
        (["--tick-ms", "0"], "argument --tick-ms: must be an integer >= 1, not 0"),
        (["--tick-ms", str(2**41)], "tick_ms must be at most"),
        (["--timeout-ms", "-5"], "argument --timeout-ms"),
        (["--report-s", "0"], "argument --report-s"),
        (["--report-s", "nan"], "argument --report-s"),
        (["--run-for-s", "-1"], "argument --run-for-s"),
        (["--no-such-option"], "unrecognized arguments: --no-such-option"),
    ],
)
def test_a_refused_option_is_an_error_line_and_status_2(
    tmp_path: Path, args: list[str], mentions: str
) -> None:
    result = _run_refused(tmp_path, *args)
    line = error_line(result, status=2, mentions=mentions)
    assert line.startswith("idle_server.py: error: ") and line.endswith(" (see --help)")
    assert result.stdout == ""  # refused before anything ran


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_port_in_use_is_one_line_and_status_1(tmp_path: Path, loop: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        uvloop = ["--uvloop"] if loop == "uvloop" else []
        result = _run_refused(tmp_path, "--port", str(port), "--run-for-s", "5", *uvloop)
    error_line(
        result, status=1, mentions=f"cannot listen on 127.0.0.1:{port}: Address already in use"
    )
    assert "listening" not in result.stdout


@pytest.mark.parametrize(
    ("host", "mentions"),
    [
        ("no-such-host.invalid", "cannot resolve --host 'no-such-host.invalid'"),
        ("192.0.2.1", "cannot listen on 192.0.2.1:0"),  # TEST-NET-1: never this machine's
    ],
)
def test_a_host_it_cannot_listen_on_is_one_line_and_status_1(
    tmp_path: Path, host: str, mentions: str
) -> None:
    result = _run_refused(tmp_path, "--host", host, "--port", "0", "--run-for-s", "5")
    error_line(result, status=1, mentions=mentions)
    assert "listening" not in result.stdout


def test_help_shows_every_options_default(tmp_path: Path) -> None:
    result = _run_refused(tmp_path, "--help")
    assert result.returncode == 0 and result.stderr == ""
    text = " ".join(result.stdout.split())
    for option, default in [
        ("--host HOST", "(default: 127.0.0.1)"),
        ("--port PORT", "(default: 8888)"),
        ("--timeout-ms TIMEOUT_MS", "(default: 30000)"),
        ("--tick-ms TICK_MS", "(default: 10)"),
        ("--report-s REPORT_S", "(default: 5.0)"),
        ("--run-for-s RUN_FOR_S", "run until SIGINT or SIGTERM"),
        ("--uvloop", "(default: False)"),
    ]:
        after = text.split(f" {option} ", 1)[1]
        assert default in after.split(" --", 1)[0], (option, default)
