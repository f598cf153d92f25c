"""A real ``redis-server`` for tests: started on 127.0.0.1 at a free port in a temporary
directory, killed, restarted on the same port, paused, and stopped by its pid.

:class:`RedisServer` is a context manager (``with RedisServer(tmp_path) as server``) that
always stops the server it started (SIGKILL of that pid, then a wait); on Linux the server
also dies with the process that started it, if that one is killed outright. It speaks just
enough RESP over a plain socket (:meth:`RedisServer.command`) to wait for the server and to
send ``CLIENT KILL``, so the kit needs no client library. Without ``redis-server`` on PATH it
fails the test with one line naming the install script (never a skip).
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

INSTALL = "bash tests/contrib/install_redis.sh"


def redis_server_path(program: str = "redis-server") -> str:
    """The redis-server executable (or ``program``: redis-sentinel), or fail the test
    with one line."""
    path = shutil.which(program)
    if path is None:
        pytest.fail(f"{program} is not installed: run `{INSTALL}` (as root)", pytrace=False)
    return path


def _die_with_parent() -> None:
    """In the child, before exec: SIGKILL when the thread that started it ends (Linux's
    PR_SET_PDEATHSIG), so a pytest killed outright leaves no redis-server behind."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _encode(*args: str | bytes) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = arg.encode() if isinstance(arg, str) else arg
        out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)


class RedisServer:
    """One redis-server process (no persistence) at ``url``; see the module doc."""

    def __init__(
        self, directory: Path, port: int | None = None, extra_args: Sequence[str] = ()
    ) -> None:
        self.program = redis_server_path()
        self.directory = directory
        self.extra_args = list(extra_args)  # more options: --replicaof, cluster mode's
        self.port = free_port() if port is None else port
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None
        self.paused = False

    def start(self, timeout_s: float = 20.0) -> None:
        """Start it (on the same port as before) and wait until it answers PING. Call it
        from the main thread: the server is killed when the thread that started it ends."""
        assert self.proc is None, "already running"
        log = open(self.directory / "redis.log", "ab")  # noqa: SIM115 - the child keeps it
        try:
            self.proc = subprocess.Popen(
                self.argv(),
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.directory,
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,  # noqa: PLW1509
            )
        finally:
            log.close()
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if self.command("PING") == b"+PONG":
                    return
            except OSError:
                pass
            if self.proc.poll() is not None:
                text = (self.directory / "redis.log").read_text(errors="replace")
                tail = text.strip().splitlines()[-1:] or ["(no output)"]
                raise RuntimeError(f"redis-server exited with {self.proc.returncode}: {tail[0]}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"redis-server on port {self.port} not ready in {timeout_s} s")
            time.sleep(0.02)

    def argv(self) -> list[str]:
        """The command line that starts it."""
        return [
            self.program,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self.directory),
            *self.extra_args,
        ]

    def kill(self) -> None:
        """SIGKILL it (resumed first if paused) and reap it. Idempotent."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            if self.paused:
                os.kill(proc.pid, signal.SIGCONT)
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=20)
        self.paused = False

    def restart(self) -> None:
        self.kill()
        self.start()

    def pause(self) -> None:
        """SIGSTOP: connections stay open, nothing is answered."""
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGCONT)
        self.paused = False

    def command(self, *args: str | bytes, timeout_s: float = 5.0) -> bytes:
        """Send one command, return the first line of the reply (``+PONG``, ``:2``)."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=timeout_s) as sock:
            sock.sendall(_encode(*args))
            reply = b""
            while b"\r\n" not in reply:
                chunk = sock.recv(4096)
                if not chunk:
                    raise ConnectionError("redis-server closed the connection")
                reply += chunk
            return reply.split(b"\r\n", 1)[0]

    def __enter__(self) -> RedisServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.kill()
