"""The idle-connection server of examples/idle_server.py, with real TCP clients on loopback.

Timing assertions are one-sided and loose: a silent connection is closed no
earlier than the timeout (less 2 ms: both the timer and uvloop's loop clock count
whole milliseconds) after the client *started* to connect (the server cannot
touch it before), and within a generous bound; a chatty connection is never
closed while it talks.
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

from ..cli_kit import assert_one_line_error, run_cli

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
sys.path.insert(0, str(EXAMPLES))
from idle_server import GOODBYE, SHUTDOWN, IdleServer  # noqa: E402

CLOCK_SLACK_S = 0.002  # two whole-millisecond clocks: the timer's and the client's
GENEROUS_S = 3.0  # a 2-core shared machine under a test run: late, but not this late


class Client(asyncio.Protocol):
    """A loopback client that records what it receives and when its connection ends."""

    def __init__(self, started_at: float) -> None:
        self.loop = asyncio.get_running_loop()
        self.started_at = started_at  # loop.time() before the connect began
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

    @property
    def lifetime_s(self) -> float:
        return self.closed.result() - self.started_at

    def send(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)


async def connect(port: int) -> Client:
    loop = asyncio.get_running_loop()
    started_at = loop.time()
    _, client = await loop.create_connection(lambda: Client(started_at), "127.0.0.1", port)
    return client


async def connect_many(port: int, n: int, batch: int = 250) -> list[Client]:
    clients: list[Client] = []
    for lo in range(0, n, batch):
        clients += await asyncio.gather(*(connect(port) for _ in range(min(batch, n - lo))))
    return clients


async def chatter(clients: list[Client], period_s: float) -> None:
    """Send one byte on every client each period, until cancelled."""
    while True:
        for client in clients:
            client.send(b".")
        await asyncio.sleep(period_s)


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
            await asyncio.wait([c.closed for c in clients], timeout=GENEROUS_S)


async def wait_until(predicate: Callable[[], bool], timeout_s: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not predicate():
        assert loop.time() < deadline, "condition not reached in time"
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


@pytest.mark.asyncio
async def test_silent_connections_are_reaped_and_chatty_ones_kept() -> None:
    timeout_ms = 300
    server = IdleServer(timeout_ms, tick_ms=10)
    clients: list[Client] = []
    async with running(server, clients):
        await server.start()
        assert server.port != 0
        silent = await connect_many(server.port, 10)
        chatty = await connect_many(server.port, 5)
        clients += silent + chatty
        talk = asyncio.create_task(chatter(chatty, 0.05))
        try:
            done, _ = await asyncio.wait([c.closed for c in silent], timeout=1 + GENEROUS_S)
            assert len(done) == len(silent), "some silent connections were never reaped"
            await asyncio.sleep(2 * timeout_ms / 1000)  # chatty ones outlive 3 timeouts
            assert not any(c.closed.done() for c in chatty), "a chatty connection was reaped"
        finally:
            talk.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await talk
        for client in silent:
            assert client.received == GOODBYE
            assert client.lifetime_s >= timeout_ms / 1000 - CLOCK_SLACK_S
            assert client.lifetime_s <= timeout_ms / 1000 + GENEROUS_S
        assert server.reaped == len(silent) and server.connections == len(chatty)
        assert server.accepted == len(clients)
        server.tracker._check_invariants()
        for client in chatty:  # a client closing by itself is forgotten, not reaped
            assert client.transport is not None
            client.transport.close()
        await wait_until(lambda: server.connections == 0, GENEROUS_S)
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
        await wait_until(lambda: server.connections == 20, GENEROUS_S)
        await server.close()
        assert server.connections == 0 and server.shut_down == 20 and server.reaped == 0
        assert len(server.tracker) == 0 and len(timer) == 0
        assert "reaper=stopped" in repr(timer)
        await asyncio.wait([c.closed for c in clients], timeout=GENEROUS_S)
        assert all(c.closed.done() and c.received == SHUTDOWN for c in clients)
        with pytest.raises(OSError):
            await connect(server.port)  # no longer listening


@pytest.mark.asyncio
async def test_three_thousand_connections_at_once(many_fds: int) -> None:
    timeout_ms = 1000
    n_silent, n_chatty = 2000, 1000
    server = IdleServer(timeout_ms, tick_ms=10)
    clients: list[Client] = []
    loop = asyncio.get_running_loop()
    async with running(server, clients):
        await server.start()
        chatty: list[Client] = []
        talk = asyncio.create_task(chatter(chatty, 0.2))
        try:
            for _ in range(4):  # interleave: chatty clients talk while the rest connect
                chatty += await connect_many(server.port, n_chatty // 4)
                clients += await connect_many(server.port, n_silent // 4)
            clients += chatty
            connected_at = loop.time()
            await wait_until(lambda: server.accepted == n_silent + n_chatty, GENEROUS_S)
            silent = [c for c in clients if c not in chatty]
            done, _ = await asyncio.wait(
                [c.closed for c in silent], timeout=timeout_ms / 1000 + 2 * GENEROUS_S
            )
            assert len(done) == n_silent, f"{n_silent - len(done)} silent connections not reaped"
            # the chatty ones outlive two timeouts after the last connect
            await asyncio.sleep(max(0.0, connected_at + 2 * timeout_ms / 1000 - loop.time()))
            assert sum(c.closed.done() for c in chatty) == 0, "chatty connections were reaped"
        finally:
            talk.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await talk
        assert server.reaped == n_silent and server.connections == n_chatty
        assert len(server.tracker) == n_chatty
        server.tracker._check_invariants()
        lifetimes = [c.lifetime_s for c in silent]
        assert min(lifetimes) >= timeout_ms / 1000 - CLOCK_SLACK_S
        assert max(lifetimes) <= timeout_ms / 1000 + 2 * GENEROUS_S
        assert all(c.received == GOODBYE for c in silent)
        await server.close()
        assert server.connections == 0 and server.shut_down == n_chatty
        await asyncio.wait([c.closed for c in chatty], timeout=GENEROUS_S)
        assert all(c.received == SHUTDOWN for c in chatty)


def _read_line(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    return proc.stdout.readline()


@pytest.mark.parametrize("how", ["sigterm", "run-for-s"])
def test_command_line_server(how: str) -> None:
    """The script itself: it reaps a silent client, then shuts down cleanly on SIGTERM
    (saying goodbye to a connected client) or after --run-for-s."""
    args = [
        sys.executable,
        str(EXAMPLES / "idle_server.py"),
        "--port",
        "0",
        "--timeout-ms",
        "200",
        "--report-s",
        "0.1",
    ]
    if how == "run-for-s":
        args += ["--run-for-s", "1.5", "--uvloop"]
    with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        try:
            assert _read_line(proc).startswith("event loop:")
            line = _read_line(proc)
            assert line.startswith("listening on 127.0.0.1:"), line
            port = int(line.split(":")[1].split(",")[0])
            with socket.create_connection(("127.0.0.1", port), timeout=10) as silent:
                assert _read_to_eof(silent) == GOODBYE
            with socket.create_connection(("127.0.0.1", port), timeout=10) as kept:
                kept.sendall(b"hello\n")
                if how == "sigterm":
                    proc.send_signal(signal.SIGTERM)
                else:
                    for _ in range(200):  # chatty until the server stops by itself (<= 10 s)
                        kept.sendall(b".")
                        if select.select([kept], [], [], 0.05)[0]:
                            break
                assert _read_to_eof(kept) == SHUTDOWN
            out, err = proc.communicate(timeout=15)
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
            await wait_until(lambda s=server: s.connections == 1, GENEROUS_S)  # type: ignore[misc]
            writer.write(b"x" * 65536)  # arrives while the server shuts down
            closing = asyncio.ensure_future(server.close())
            got = await asyncio.wait_for(reader.read(), GENEROUS_S)
            assert got == SHUTDOWN
            writer.close()
            await closing
            assert server.connections == 0 and server.shut_down == 1
        finally:
            await server.close()


# -- the command line's bad input: one line on stderr, no traceback, nothing left ---------


def _run_refused(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the server with ``args`` in an empty folder; it must leave it empty."""
    result = run_cli([str(EXAMPLES / "idle_server.py"), *args], cwd=tmp_path, timeout_s=30)
    assert list(tmp_path.iterdir()) == []
    return result


@pytest.mark.parametrize(
    ("args", "mentions"),
    [
        (["--port", "70000"], "argument --port: must be an integer from 0 to 65535, not '70000'"),
        (["--port", "-1"], "argument --port"),
        (["--port", "http"], "argument --port"),
        (["--tick-ms", "0"], "argument --tick-ms: must be an integer >= 1, not '0'"),
        (["--tick-ms", str(2**41)], "tick_ms must be at most"),
        (["--timeout-ms", "-5"], "argument --timeout-ms"),
        (["--report-s", "0"], "argument --report-s"),
        (["--report-s", "nan"], "argument --report-s"),
        (["--run-for-s", "-1"], "argument --run-for-s"),
        (["--no-such-option"], "unrecognized arguments: --no-such-option"),
    ],
)
def test_a_refused_option_is_one_line_and_status_2(
    tmp_path: Path, args: list[str], mentions: str
) -> None:
    result = _run_refused(tmp_path, *args)
    line = assert_one_line_error(result, status=2, mentions=mentions)
    assert line.startswith("idle_server.py: error: ") and line.endswith("(see --help)")
    assert result.stdout == ""  # refused before anything ran


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_port_in_use_is_one_line_and_status_1(tmp_path: Path, loop: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        uvloop = ["--uvloop"] if loop == "uvloop" else []
        result = _run_refused(tmp_path, "--port", str(port), "--run-for-s", "5", *uvloop)
    assert_one_line_error(
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
    assert_one_line_error(result, status=1, mentions=mentions)
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
        ("--run-for-s RUN_FOR_S", "(default: run until SIGINT or SIGTERM)"),
        ("--uvloop", "(default: off)"),
    ]:
        after = text.split(f" {option} ", 1)[1]
        assert default in after.split(" --", 1)[0], (option, default)
