"""Child processes for crash tests: start, read their lines with a deadline, SIGKILL.

A :class:`Child` is one ``subprocess.Popen`` whose stdout the test reads line by
line without blocking past a deadline (a :class:`LineReader`: ``select`` on the pipe,
then ``os.read``).
:meth:`Child.kill` sends SIGKILL to that pid only, reaps it, and keeps what the
child had written before it died (those lines were printed, so they count).
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO

#: The root of the suite's project (the folder above its tests, found without following
#: links: the application's suite links this file): children run there.
ROOT = Path(__file__).absolute().parents[1]

#: How a child runs ``-m MODULE ARGS``: as ``python -m`` does, but with ROOT appended to
#: sys.path instead of the working directory prepended (``-P``), so the tests' package
#: imports and an installed package still wins over the source tree's (the suite runs
#: against the installed wheels: ``--import-mode=append``, ``PURGATORY_EXPECT_INSTALLED``)
RUN_MODULE = (
    "import runpy, sys; sys.path.append(sys.argv.pop(1)); "
    "runpy.run_module(sys.argv.pop(1), run_name='__main__', alter_sys=True)"
)


class LineReader:
    """The whole lines of a child's pipe, each read with a deadline; what arrived
    before the child died still counts."""

    __slots__ = ("_eof", "_fd", "_pending")

    def __init__(self, stream: IO[bytes]) -> None:
        self._fd = stream.fileno()
        self._pending = bytearray()
        self._eof = False

    def read_line(self, timeout_s: float) -> bytes | None:
        """The next line (without the newline), or None at EOF. TimeoutError if no
        whole line arrives within ``timeout_s`` (0: only what was already written)."""
        deadline = time.monotonic() + timeout_s
        while True:
            end = self._pending.find(b"\n")
            if end >= 0:
                line = bytes(self._pending[:end])
                del self._pending[: end + 1]
                return line
            if self._eof:
                return None
            ready, _, _ = select.select([self._fd], [], [], max(0.0, deadline - time.monotonic()))
            if ready:
                chunk = os.read(self._fd, 1 << 20)
                if chunk:
                    self._pending += chunk
                else:
                    self._eof = True
            elif time.monotonic() >= deadline:
                raise TimeoutError(f"no line from the child within {timeout_s} s")


class Child:
    """A child process, Python unless ``program`` names another; use as a context
    manager (it is killed on exit). ``merge_stderr``: its stderr lines come
    through :meth:`read_line` too (then :meth:`stderr` has nothing)."""

    def __init__(
        self, args: Sequence[str], *, program: str | None = None, merge_stderr: bool = False
    ) -> None:
        if program is None and args and args[0] == "-m":
            args = ["-P", "-c", RUN_MODULE, str(ROOT), *args[1:]]
        self.proc = subprocess.Popen(
            [sys.executable if program is None else program, *args],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
        )
        assert self.proc.stdout is not None
        self._lines = LineReader(self.proc.stdout)

    def read_line(self, timeout_s: float) -> str | None:
        """The next line of stdout (without the newline), or None at EOF.

        Raises TimeoutError if no whole line arrives within ``timeout_s``.
        """
        line = self._lines.read_line(timeout_s)
        return None if line is None else line.decode()

    def kill(self) -> list[str]:
        """SIGKILL the child, reap it, return the whole lines it wrote and we had not read."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        lines = []
        while (line := self.read_line(10)) is not None:
            lines.append(line)
        return lines

    def terminate(self, timeout_s: float = 10.0) -> int:
        """SIGTERM the child (asks it to stop cleanly), wait for it; its exit status."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
        return self.proc.wait(timeout=timeout_s)

    def stderr(self) -> str:
        """What the child wrote on stderr (call after it exited)."""
        if self.proc.stderr is None:
            return ""
        return self.proc.stderr.read().decode(errors="replace")

    def close(self) -> None:
        """SIGKILL the child if it still runs, reap it, close the pipes. Idempotent."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()

    def __enter__(self) -> Child:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
