"""The one place that decides which async library runs: asyncio (uvloop, anyio on
asyncio) or trio (anyio on trio), or none.

Everything of the async shell that depends on the library (the reaper's sleep
and task, where callback errors go, scheduling from another thread, how to read
the loop's clock) is a method of a :class:`~.base.Backend` (awaiting an operation too, but on
asyncio the core does it itself: see :mod:`purgatory.aio.operation`), and
:func:`current_backend` picks the backend of the running library, in this order
(the order keeps the asyncio path as cheap as it was before trio was supported):

1. **asyncio**: ``asyncio._get_running_loop()``, one C call that returns the
   running loop or ``None``;
2. **trio**: only when no asyncio loop runs, and only if ``trio`` is already
   imported (``sys.modules``; this module never imports it),
   ``trio.lowlevel.in_trio_run()``; the trio backend module is imported then,
   so asyncio users never import trio.

Trio guest mode hosted on an asyncio loop is not supported: the asyncio loop is
found first, so a trio task there would be given asyncio primitives.
"""

from __future__ import annotations

import asyncio
import sys
from time import monotonic
from typing import Any

from ...core.clock import ClockReader
from ...core.report import collect_exception
from .asyncio_backend import AsyncioBackend
from .base import Backend

__all__ = [
    "Backend",
    "clock_reader",
    "current_backend",
    "in_trio_run",
    "report_to_running_library",
    "require_backend",
    "running_loop",
]

#: Returns the running loop of this thread or ``None``; a C function, cheap.
running_loop = asyncio._get_running_loop

# the backend of the last loop seen: one loop runs per thread at a time, so this
# saves an allocation per call in the steady state
_last: AsyncioBackend | None = None


def in_trio_run() -> bool:
    """True inside ``trio.run`` (anyio's trio backend included). Never imports trio.

    Call it only once :func:`running_loop` returned ``None``. O(1): a dict lookup,
    then an attribute check when trio is imported.
    """
    trio = sys.modules.get("trio")
    return trio is not None and bool(trio.lowlevel.in_trio_run())


def current_backend() -> Backend | None:
    """The backend of the library running on this thread, or None. O(1)."""
    global _last
    loop = running_loop()
    if loop is not None:
        last = _last
        if last is not None and last.loop is loop:
            return last
        _last = last = AsyncioBackend(loop)
        return last
    if in_trio_run():
        from .trio_backend import TRIO

        return TRIO
    return None


def require_backend(what: str) -> Backend:
    """:func:`current_backend`, or RuntimeError saying that ``what`` needs a loop."""
    backend = current_backend()
    if backend is None:
        raise RuntimeError(f"{what} needs a running event loop")
    return backend


def report_to_running_library(
    owner: object,
    message: str,
    exc: BaseException,
    collected: list[BaseException] | None,
    **context: Any,
) -> None:
    """``report_exception(message, exc, collected, **context)``, the async shell's rule,
    a method of its timer and purgatory (``report_exception =
    report_to_running_library``): a callback's exception goes to the running library
    (the loop's exception handler with ``message`` and ``context``; on trio the
    ``"purgatory"`` logger); with none running, the core's rule
    (``purgatory.core.report.collect_exception``). O(1)."""
    backend = current_backend()
    if backend is None:
        collect_exception(owner, message, exc, collected)
    else:
        backend.report(message, exc, context)


def _time_without_loop() -> float:
    """Seconds on trio's clock inside ``trio.run``, else ``time.monotonic()``."""
    if in_trio_run():
        return sys.modules["trio"].current_time()  # type: ignore[no-any-return]
    return monotonic()


#: reads trio's clock inside a trio run, else time.monotonic(): whichever runs now
_WITHOUT_LOOP = ClockReader.seconds(_time_without_loop)


def clock_reader(loop: asyncio.AbstractEventLoop | None) -> ClockReader:
    """The cheapest :class:`~purgatory.core.ClockReader` of the clock of ``loop``
    (with ``loop`` None: of the running library's, trio's inside a trio run, else
    monotonic, asked at every read). O(1)."""
    if loop is None:
        return _WITHOUT_LOOP
    return AsyncioBackend(loop).clock_reader()
